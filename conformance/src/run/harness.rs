//! The runner's side of the harness protocol (conformance/HARNESS.md): start a command, read
//! its hello, then one request line out and one response line in per vector.

use super::Response;
use crate::vectors::{Kind, Loaded};
use anyhow::{Context as _, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The protocol this runner speaks.
pub const PROTOCOL: &str = "countersign-harness/1";

/// The first line a harness prints.
#[derive(Clone, Debug, Deserialize)]
pub struct Hello {
    pub protocol: String,
    pub implementation: String,
    /// The kinds of vectors it answers (`evidence`, `op_hash`).
    pub kinds: Vec<Kind>,
    /// Flags whose vectors it does not implement, with the reason; such vectors are skipped
    /// without being sent.
    #[serde(default)]
    pub unsupported_flags: std::collections::BTreeMap<String, String>,
}

/// A running harness.
#[derive(Debug)]
pub struct Harness {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    pub hello: Hello,
}

impl Harness {
    /// Start `command` (run by `sh -c`) and read its hello line.
    pub fn start(command: &str) -> anyhow::Result<Self> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting harness {command:?}"))?;
        let stdin = child.stdin.take().context("harness stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("harness stdout")?);
        let mut harness = Self {
            child,
            stdin: Some(stdin),
            stdout,
            hello: Hello {
                protocol: String::new(),
                implementation: String::new(),
                kinds: Vec::new(),
                unsupported_flags: Default::default(),
            },
        };
        let line = harness
            .read_line()?
            .context("harness exited before its hello line")?;
        let hello: Hello = serde_json::from_str(&line)
            .with_context(|| format!("harness hello is not valid: {line}"))?;
        if hello.protocol != PROTOCOL {
            bail!(
                "harness speaks {:?}, this runner speaks {PROTOCOL:?}",
                hello.protocol
            );
        }
        harness.hello = hello;
        Ok(harness)
    }

    fn read_line(&mut self) -> anyhow::Result<Option<String>> {
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .context("reading from the harness")?;
        Ok((n > 0).then(|| line.trim_end().to_owned()))
    }

    /// Why this harness will not be sent `v`, if it will not.
    pub fn skip_reason(&self, v: &Loaded) -> Option<String> {
        if !self.hello.kinds.contains(&v.kind) {
            return Some(format!("{} vectors not implemented", v.kind.as_str()));
        }
        v.vector.flags.iter().find_map(|f| {
            self.hello
                .unsupported_flags
                .get(f)
                .map(|why| format!("flag {f}: {why}"))
        })
    }

    /// Send one vector and read its response.
    pub fn ask(&mut self, v: &Loaded) -> anyhow::Result<Response> {
        let (member, input) = v.vector.input.member();
        let mut request = serde_json::Map::new();
        request.insert("id".into(), json!(v.vector.id));
        request.insert("kind".into(), json!(v.kind.as_str()));
        request.insert("flags".into(), json!(v.vector.flags));
        request.insert(member.into(), input);
        let request = Value::Object(request);
        let stdin = self.stdin.as_mut().context("harness stdin closed")?;
        writeln!(stdin, "{request}").context("writing to the harness")?;
        stdin.flush().context("writing to the harness")?;
        let line = self
            .read_line()?
            .with_context(|| format!("harness exited while answering {}", v.vector.id))?;
        let response: Value = serde_json::from_str(&line)
            .with_context(|| format!("harness answer to {} is not JSON: {line}", v.vector.id))?;
        if response.get("id").and_then(Value::as_str) != Some(v.vector.id.as_str()) {
            bail!("harness answered {line} to request {}", v.vector.id);
        }
        Ok(if let Some(verdict) = response.get("verdict") {
            Response::Verdict(verdict.clone())
        } else if let Some(why) = response.get("unsupported") {
            Response::Unsupported(why.as_str().map_or_else(|| why.to_string(), str::to_owned))
        } else if let Some(e) = response.get("error") {
            Response::Error(e.as_str().map_or_else(|| e.to_string(), str::to_owned))
        } else {
            Response::Error(format!(
                "answer has no verdict, unsupported or error: {line}"
            ))
        })
    }

    /// Close stdin and wait for the harness to exit.
    pub fn finish(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        let status = self.child.wait().context("waiting for the harness")?;
        if !status.success() {
            bail!("harness exited with {status}");
        }
        Ok(())
    }
}
