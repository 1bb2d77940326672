//! The demo's agent: an MCP client that talks to `countersign mcp stdio` over its stdio, as an
//! agent host (Claude Desktop, an IDE) would.

use anyhow::Context as _;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The protocol revision the demo's client asks for: one without URL elicitation, so a held call
/// is answered with the model-readable tool error (docs/MCP.md, answer B).
const REVISION: &str = "2025-06-18";

/// Bounds a hang only (a retry parks at most 55 s at the interposer); never a speed assertion.
const ANSWER_WITHIN: Duration = Duration::from_secs(300);

/// One MCP session through a running interposer.
pub(crate) struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Session {
    /// Start `program ARGS` (the interposer), initialize and list its tools.
    pub(crate) async fn start(program: &Path, args: &[OsString]) -> anyhow::Result<Self> {
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        // A terminal's Ctrl-C reaches the whole foreground process group; the demo stops the
        // interposer itself, by closing its input, so that it writes its audit close line.
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {}", program.display()))?;
        let stdin = child.stdin.take().context("the interposer's stdin")?;
        let stdout = child.stdout.take().context("the interposer's stdout")?;
        let mut session = Self {
            child,
            stdin: Some(stdin),
            lines: BufReader::new(stdout).lines(),
            next_id: 0,
        };
        let init = session
            .request(
                "initialize",
                json!({
                    "protocolVersion": REVISION,
                    "capabilities": {},
                    "clientInfo": {"name": "countersign-demo", "version": env!("CARGO_PKG_VERSION")},
                }),
            )
            .await?;
        anyhow::ensure!(
            init.get("result").is_some(),
            "the MCP server refused to initialize: {init}"
        );
        session
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        let listed = session.request("tools/list", json!({})).await?;
        anyhow::ensure!(
            listed.pointer("/result/tools").is_some(),
            "tools/list failed: {listed}"
        );
        Ok(session)
    }

    /// Call `name` with `arguments`: the whole JSON-RPC answer.
    pub(crate) async fn call_tool(
        &mut self,
        name: &str,
        arguments: &Value,
    ) -> anyhow::Result<Value> {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// Close the interposer's input and wait for it to finish (it writes its audit log's close
    /// line, and its upstream exits on end of input).
    pub(crate) async fn close(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        match tokio::time::timeout(ANSWER_WITHIN, self.child.wait()).await {
            Ok(status) => {
                let status = status.context("waiting for the interposer")?;
                anyhow::ensure!(status.success(), "the interposer ended with {status}");
                Ok(())
            }
            Err(_) => {
                self.child.kill().await.context("stopping the interposer")?;
                anyhow::bail!("the interposer did not stop when its input closed")
            }
        }
    }

    async fn send(&mut self, message: &Value) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("the session is closed")?;
        let mut line = message.to_string();
        line.push('\n');
        stdin
            .write_all(line.as_bytes())
            .await
            .context("writing to the interposer")?;
        stdin.flush().await.context("writing to the interposer")?;
        Ok(())
    }

    /// Send a request and read until its answer; the server's own requests get "method not
    /// found" (the demo's client offers no capabilities), its notifications are skipped.
    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        loop {
            let line = tokio::time::timeout(ANSWER_WITHIN, self.lines.next_line())
                .await
                .with_context(|| format!("no answer to {method}"))?
                .context("reading from the interposer")?
                .with_context(|| {
                    format!("the interposer closed its output before answering {method}")
                })?;
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                anyhow::bail!("the interposer wrote a line that is not JSON: {line}");
            };
            match (message.get("id"), message.get("method")) {
                (Some(got), None) if *got == json!(id) => return Ok(message),
                (Some(theirs), Some(_)) => {
                    let refusal = json!({"jsonrpc": "2.0", "id": theirs,
                        "error": {"code": -32601, "message": "method not found"}});
                    self.send(&refusal).await?;
                }
                _ => {}
            }
        }
    }
}

/// The text of a `CallToolResult` (its text contents, one per line).
pub(crate) fn result_text(answer: &Value) -> String {
    let texts: Vec<&str> = answer
        .pointer("/result/content")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|c| c.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if texts.is_empty() {
        answer.to_string()
    } else {
        texts.join("\n")
    }
}

/// Whether the answer is a successful tool result.
pub(crate) fn succeeded(answer: &Value) -> bool {
    answer.get("result").is_some()
        && answer.pointer("/result/isError").and_then(Value::as_bool) != Some(true)
}
