//! The built-in MCP tool server of `countersign demo`, for machines without Node.
//!
//! It speaks MCP over stdio (one JSON-RPC message per line) and offers the two tools the demo
//! calls, with the names and argument shapes of the reference filesystem server
//! (`@modelcontextprotocol/server-filesystem`), so the demo sends the same calls to either:
//!
//! - `list_directory {path}`: the names in the one directory it serves (read-only: relayed);
//! - `write_file {path, content}`: writes a file directly in that directory (held for approval).
//!
//! Both refuse any path other than the directory itself or a plain file name inside it: no
//! `..`, no subdirectories, no symlinked escape (the parent is compared after resolving).

use serde_json::{Value, json};
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};

/// The protocol revisions this server speaks; it answers with the client's if listed, else
/// [`NEWEST`].
const REVISIONS: [&str; 3] = [NEWEST, "2025-06-18", "2025-03-26"];
const NEWEST: &str = "2025-11-25";

/// Serve MCP on stdin/stdout for the files of `root` until stdin closes.
pub(crate) fn run(root: &Path) -> anyhow::Result<u8> {
    let root = root
        .canonicalize()
        .map_err(|e| anyhow::anyhow!("the served directory {}: {e}", root.display()))?;
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(answer) = answer(&root, &line) {
            writeln!(stdout, "{answer}")?;
            stdout.flush()?;
        }
    }
    Ok(crate::exit::EXIT_ALLOW)
}

/// The answer to one message; `None` for a notification or a response.
fn answer(root: &Path, line: &str) -> Option<Value> {
    let Ok(message) = serde_json::from_str::<Value>(line) else {
        return Some(error(Value::Null, -32700, "not JSON"));
    };
    let id = message.get("id").cloned()?;
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return None; // a response to a request of ours: we send none
    };
    let params = message.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => initialize(&params),
        "ping" => json!({}),
        "tools/list" => tools(),
        "tools/call" => call(root, &params),
        _ => return Some(error(id, -32601, "method not found")),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let revision = asked
        .and_then(|a| REVISIONS.into_iter().find(|r| *r == a))
        .unwrap_or(NEWEST);
    json!({
        "protocolVersion": revision,
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "countersign-demo-tools", "version": env!("CARGO_PKG_VERSION")},
    })
}

fn tools() -> Value {
    let path = json!({"type": "string", "description": "An absolute path"});
    json!({"tools": [
        {
            "name": "list_directory",
            "description": "List the files of the demo's directory.",
            "inputSchema": {"type": "object", "properties": {"path": path}, "required": ["path"]},
            "annotations": {"readOnlyHint": true},
        },
        {
            "name": "write_file",
            "description": "Create or overwrite a file in the demo's directory.",
            "inputSchema": {
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
            "annotations": {"readOnlyHint": false, "destructiveHint": true},
        },
    ]})
}

/// A `tools/call`: the tool's text, or a tool error saying why not.
fn call(root: &Path, params: &Value) -> Value {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
    let text = |key: &str| arguments.get(key).and_then(Value::as_str);
    let outcome = match (name, text("path")) {
        ("list_directory", Some(path)) => list(root, Path::new(path)),
        ("write_file", Some(path)) => match text("content") {
            Some(content) => write(root, Path::new(path), content),
            None => Err("content must be a string".to_owned()),
        },
        ("list_directory" | "write_file", None) => Err("path must be a string".to_owned()),
        _ => Err(format!("unknown tool {name:?}")),
    };
    match outcome {
        Ok(text) => json!({"content": [{"type": "text", "text": text}], "isError": false}),
        Err(why) => json!({"content": [{"type": "text", "text": why}], "isError": true}),
    }
}

fn list(root: &Path, path: &Path) -> Result<String, String> {
    let dir = path.canonicalize().map_err(|e| e.to_string())?;
    if dir != root {
        return Err(format!("only {} can be listed", root.display()));
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let kind = if entry.path().is_dir() {
            "[DIR]"
        } else {
            "[FILE]"
        };
        names.push(format!("{kind} {}", entry.file_name().to_string_lossy()));
    }
    names.sort();
    Ok(names.join("\n"))
}

fn write(root: &Path, path: &Path, content: &str) -> Result<String, String> {
    let target = inside(root, path)?;
    std::fs::write(&target, content).map_err(|e| e.to_string())?;
    Ok(format!("Successfully wrote to {}", path.display()))
}

/// `path` if it names a plain file directly in `root` (a name without separators or dots
/// only, under a parent that resolves to `root`).
fn inside(root: &Path, path: &Path) -> Result<PathBuf, String> {
    let refused = || format!("only a file directly in {} can be written", root.display());
    let name = path.file_name().ok_or_else(refused)?;
    let parent = path.parent().ok_or_else(refused)?;
    let parent = parent.canonicalize().map_err(|_| refused())?;
    if parent != root || name.to_string_lossy().starts_with('.') {
        return Err(refused());
    }
    let target = parent.join(name);
    // A symlink planted in the directory could point anywhere: never followed.
    if target.is_symlink() || target.is_dir() {
        return Err(refused());
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "countersign-demo-tools-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    fn tool_call(root: &Path, name: &str, arguments: Value) -> Value {
        let line = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}});
        answer(root, &line.to_string()).unwrap()
    }

    #[test]
    fn it_lists_and_writes_files_of_its_directory() {
        let root = scratch();
        let file = root.join("hello.txt");
        let wrote = tool_call(
            &root,
            "write_file",
            json!({"path": file.to_str().unwrap(), "content": "hi\n"}),
        );
        assert_eq!(wrote["id"], 7);
        assert_eq!(wrote["result"]["isError"], false, "{wrote}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi\n");
        let listed = tool_call(
            &root,
            "list_directory",
            json!({"path": root.to_str().unwrap()}),
        );
        assert_eq!(listed["result"]["content"][0]["text"], "[FILE] hello.txt");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn it_refuses_paths_outside_its_directory_and_unknown_tools() {
        let root = scratch();
        std::fs::create_dir(root.join("sub")).unwrap();
        for path in [
            root.join("../escape.txt"),
            root.join("sub/deeper.txt"),
            root.join(".hidden"),
            root.join("sub"),
            PathBuf::from("relative.txt"),
        ] {
            let refused = tool_call(
                &root,
                "write_file",
                json!({"path": path.to_str().unwrap(), "content": "x"}),
            );
            assert_eq!(refused["result"]["isError"], true, "{path:?}: {refused}");
        }
        assert!(!root.parent().unwrap().join("escape.txt").exists());
        let listed = tool_call(&root, "list_directory", json!({"path": "/"}));
        assert_eq!(listed["result"]["isError"], true);
        let unknown = tool_call(&root, "delete_file", json!({"path": "x"}));
        assert_eq!(unknown["result"]["isError"], true);
        let method = answer(
            &root,
            r#"{"jsonrpc":"2.0","id":1,"method":"resources/list"}"#,
        );
        assert_eq!(method.unwrap()["error"]["code"], -32601);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn initialize_answers_the_clients_revision_and_notifications_get_nothing() {
        let root = scratch();
        let init = answer(
            &root,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}"#,
        )
        .unwrap();
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
        assert!(
            answer(
                &root,
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
            )
            .is_none()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
