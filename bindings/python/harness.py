#!/usr/bin/env python3
"""The `countersign` Python package as a conformance harness (conformance/HARNESS.md).

    cargo run -q -p countersign-conformance -- run --impl 'PYTHON bindings/python/harness.py'

where PYTHON has the package installed. Every vector goes through the binding: evidence through
`verify_case`, op_hash documents through `op_hash_document`.
"""

import base64
import json
import sys

import countersign


def answer(request):
    if "input_text" in request:
        raw = request["input_text"].encode("utf-8")
    elif "input_base64" in request:
        raw = base64.b64decode(request["input_base64"])
    else:
        raw = json.dumps(request["input"], ensure_ascii=False).encode("utf-8")
    if request["kind"] == "op_hash":
        try:
            return {"op_hash": countersign.op_hash_document(raw)}
        except countersign.UnusableInput as e:
            return {"error": e.reason_code}
    try:
        return countersign.verify_case(raw).to_dict()
    except countersign.UnusableInput as e:
        # No verdict for an unusable CASE: name the member at fault.
        return {"unusable_case": e.member}


def main():
    hello = {
        "protocol": "countersign-harness/1",
        "implementation": f"countersign-python {countersign.__version__} ({countersign.BACKEND})",
        "kinds": ["evidence", "op_hash"],
    }
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            response = {"id": request["id"], "verdict": answer(request)}
        except countersign.UnusableInput as e:
            response = {"id": request["id"], "error": f"unusable input: {e}"}
        print(json.dumps(response, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
