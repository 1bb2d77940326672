//! The MCP server the demo's interposer fronts: the reference filesystem server under Node, or
//! the tool server built into this binary.

use super::{McpServer, say};
use anyhow::Context as _;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The upstream MCP server's command line, and what to call it.
pub(super) struct Upstream {
    pub(super) command: Vec<OsString>,
    pub(super) name: String,
}

impl Upstream {
    pub(super) fn choose(wanted: McpServer, workspace: &Path) -> anyhow::Result<Self> {
        let builtin = || -> anyhow::Result<Self> {
            let me = std::env::current_exe().context("locating this binary")?;
            Ok(Self {
                command: vec![
                    me.into_os_string(),
                    "demo".into(),
                    "tool-server".into(),
                    "--root".into(),
                    workspace.as_os_str().to_owned(),
                ],
                name: "the built-in tool server (countersign demo tool-server)".to_owned(),
            })
        };
        if wanted == McpServer::Builtin {
            return builtin();
        }
        match reference_server() {
            Some(script) => Ok(Self {
                name: format!(
                    "@modelcontextprotocol/server-filesystem ({})",
                    script.display()
                ),
                command: vec![
                    "node".into(),
                    script.into_os_string(),
                    workspace.as_os_str().to_owned(),
                ],
            }),
            None if wanted == McpServer::Filesystem => anyhow::bail!(
                "--mcp-server filesystem: Node (`node` on PATH) and \
                 @modelcontextprotocol/server-filesystem in ./node_modules or \
                 ./tests/mcp/node_modules are needed (in a clone: cd tests/mcp && npm ci)"
            ),
            None => {
                say(
                    "(Node or @modelcontextprotocol/server-filesystem not found: using the \
                     built-in tool server. For the reference server: cd tests/mcp && npm ci)",
                );
                builtin()
            }
        }
    }
}

/// The reference filesystem server's entry point, when Node runs here and the package is
/// installed where a clone keeps its MCP peers.
fn reference_server() -> Option<PathBuf> {
    let node = std::process::Command::new("node")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    if !node.success() {
        return None;
    }
    let package = "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js";
    ["", "tests/mcp"]
        .iter()
        .map(|base| Path::new(base).join(package))
        .find(|p| p.is_file())
        .and_then(|p| p.canonicalize().ok())
}
