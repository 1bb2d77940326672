//! `countersign witness`: a C2SP tlog-witness that cosigns the service's audit checkpoints.
//!
//! The protocol itself lives in `proofs.rs` beside the other checkpoint code; this module is the
//! command line.

use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub(crate) enum WitnessCommand {
    /// Serve C2SP tlog-witness `POST /add-checkpoint` for the given logs.
    ///
    /// For each log (by its checkpoint origin) the witness keeps the last checkpoint it
    /// cosigned in STATE_DIR and cosigns a new one only with a consistency proof from it: it
    /// answers 409 (with the size it holds) to a stale or rolled-back size or a second root at
    /// the same size, 422 to a proof that does not verify (a fork), 403 to a checkpoint not
    /// signed by the log's key, 404 to an unknown log. Prints its own vkey on start: give it
    /// to the service (`[[witnesses]]` in its config) and to auditors (`audit verify
    /// --witness-key`). Runs until SIGTERM or Ctrl-C.
    #[command(
        after_help = "Example:\n  countersign witness keygen --name witness.example/w1 \
                            --out w1.key\n  countersign witness serve --listen 127.0.0.1:7380 \
                            --key w1.key --log-key \"$(curl -s https://approvals.example/v1/service-key \
                            | jq -r .checkpoint_vkey)\""
    )]
    Serve {
        /// Address and port to listen on (port 0 picks a free one; the address is printed).
        #[arg(long, default_value = "127.0.0.1:7380")]
        listen: std::net::SocketAddr,
        /// The witness's signer key file (PRIVATE+KEY+..., from `witness keygen`).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// A log's C2SP vkey (origin+keyid+base64(0x01 || key)): GET /v1/service-key's
        /// checkpoint_vkey. Repeatable.
        #[arg(long, value_name = "PUB", required = true)]
        log_key: Vec<String>,
        /// Where the last cosigned checkpoint of each log is kept (survives restarts; losing
        /// it lets the witness be rolled back, so back it up or retire the witness key).
        #[arg(long, default_value = "countersign-witness")]
        state_dir: PathBuf,
    },
    /// Create a witness signer key file and print its vkey.
    Keygen {
        /// The witness's name (a schema-less URL, e.g. witness.example/w1).
        #[arg(long)]
        name: String,
        /// The key file to create (owner-only; never overwritten).
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
}

pub(crate) fn run(command: WitnessCommand) -> anyhow::Result<u8> {
    match command {
        WitnessCommand::Serve {
            listen,
            key,
            log_key,
            state_dir,
        } => crate::proofs::witness_serve(listen, &key, &log_key, &state_dir),
        WitnessCommand::Keygen { name, out } => crate::proofs::witness_keygen(&name, &out),
    }
}
