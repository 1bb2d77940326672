// An upstream MCP server that reads its stdin the way the official Go SDK
// (github.com/modelcontextprotocol/go-sdk, mcp/transport.go, ioConn) does, with the standard
// library only: one json.Decoder over the whole stream, each value taken whole as a
// json.RawMessage, the byte after it required to be "\n" or "\r"; a JSON array is a batch; each
// message is then unmarshalled with encoding/json into structs (case-insensitive member names,
// Unicode simple folding included; the last of duplicate members wins; invalid UTF-8 and lone
// surrogates become U+FFFD), and a tools/call's params into {Name string; Arguments RawMessage}
// as the SDK's CallToolParamsRaw.
//
// Two deliberate differences, both making this reader execute more than the SDK, never less:
// - a frame that does not decode ends the SDK's connection; here the rest of that line is skipped
//   and reading goes on, so one unreadable frame does not hide the frames after it;
// - a tools/call without an id (a notification) is executed too, as a careless server might.
//
// Every executed tools/call of a known tool is appended to $READER_RECORD as one JSON line
// {"reader": "go", "tool", "case"} (case: the corpus marker in its arguments). Tools: read_file
// (read-only) and write_file. Used by test_differential_readers.py.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
)

type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type initParams struct {
	ProtocolVersion string `json:"protocolVersion"`
}

var known = map[string]bool{"read_file": true, "write_file": true}

var tools = []map[string]any{
	{"name": "read_file", "description": "Read a file.", "inputSchema": map[string]any{"type": "object"},
		"annotations": map[string]any{"readOnlyHint": true}},
	{"name": "write_file", "description": "Write a file.", "inputSchema": map[string]any{"type": "object"},
		"annotations": map[string]any{"destructiveHint": true, "readOnlyHint": false}},
}

var out = bufio.NewWriter(os.Stdout)

func record(tool string, arguments json.RawMessage) {
	var marked struct {
		Case *string `json:"case"`
	}
	json.Unmarshal(arguments, &marked)
	line, _ := json.Marshal(map[string]any{"reader": "go", "tool": tool, "case": marked.Case})
	f, err := os.OpenFile(os.Getenv("READER_RECORD"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	f.Write(append(line, '\n'))
	f.Close()
}

func answer(id json.RawMessage, member string, value any) {
	line, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, member: value})
	out.Write(append(line, '\n'))
	out.Flush()
}

func handle(raw json.RawMessage) {
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return
	}
	isRequest := len(m.ID) > 0
	switch m.Method {
	case "initialize":
		var p initParams
		json.Unmarshal(m.Params, &p)
		answer(m.ID, "result", map[string]any{"protocolVersion": p.ProtocolVersion,
			"capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo":   map[string]any{"name": "reader-go", "version": "1"}})
	case "tools/list":
		answer(m.ID, "result", map[string]any{"tools": tools})
	case "tools/call":
		var p callParams
		if err := json.Unmarshal(m.Params, &p); err != nil || !known[p.Name] {
			if isRequest {
				answer(m.ID, "error", map[string]any{"code": -32602, "message": "invalid params"})
			}
			return
		}
		record(p.Name, p.Arguments)
		if isRequest {
			answer(m.ID, "result", map[string]any{"content": []any{map[string]any{"type": "text", "text": "done"}}})
		}
	default:
		if isRequest && m.Method != "" {
			answer(m.ID, "result", map[string]any{})
		}
	}
}

func dispatch(raw json.RawMessage) {
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(raw, &batch) == nil {
			for _, item := range batch {
				handle(item)
			}
		}
		return
	}
	handle(raw)
}

func main() {
	var src io.Reader = bufio.NewReader(os.Stdin)
	for {
		dec := json.NewDecoder(src)
		for {
			var raw json.RawMessage
			err := dec.Decode(&raw)
			if err == nil {
				var next [1]byte
				if n, _ := dec.Buffered().Read(next[:]); n > 0 && next[0] != '\n' && next[0] != '\r' {
					err = io.ErrUnexpectedEOF // the SDK's "invalid trailing data"
				}
			}
			if err == io.EOF {
				return
			}
			if err != nil {
				// Resynchronise after the next newline (see the file comment): what the
				// decoder holds, then the rest of the current source.
				rest := bufio.NewReader(io.MultiReader(dec.Buffered(), src))
				if _, skip := rest.ReadBytes('\n'); skip != nil {
					return
				}
				src = rest
				break
			}
			dispatch(raw)
		}
	}
}
