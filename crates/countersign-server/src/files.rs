//! File names inside the data directory: the one layout the service, the CLI and the tests share.
//! A leaf module: it imports nothing, so the store (which opens the database) and the boot code
//! (which creates the rest) can both name the files without importing each other.

/// The SQLite database.
pub const DATABASE: &str = "countersign.db";
/// The audit log (JSON lines).
pub const AUDIT_LOG: &str = "audit.jsonl";
/// The audit signing key seed (base64url, owner-only).
pub const SERVICE_KEY: &str = "service-key";
/// The audit public key (base64url), for auditors.
pub const SERVICE_PUBLIC_KEY: &str = "service-key.pub";
