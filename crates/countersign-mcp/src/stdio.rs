//! The interposer's own stdin and stdout as async pipes.
//!
//! Tokio's `stdin()` and `stdout()` hand every read and every write to a blocking thread and wait
//! for it: two thread hand-offs per relayed call, on a path whose whole budget is a few
//! microseconds of CPU. When the agent host gave the interposer pipes (the usual case), they are
//! read and written in the runtime instead, non-blocking. Anything else (a terminal, a file, a
//! socket), and stdout when stderr is the same pipe (making it non-blocking would make the
//! interposer's and the upstream's stderr non-blocking too), keeps tokio's.

use tokio::io::{AsyncRead, AsyncWrite};

/// The client's side of the relay: what the interposer reads.
pub(crate) fn input() -> Box<dyn AsyncRead + Unpin + Send> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd as _;
        if let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned()
            && let Ok(pipe) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
        {
            return Box::new(pipe);
        }
    }
    Box::new(tokio::io::stdin())
}

/// The client's side of the relay: where the interposer writes.
pub(crate) fn output() -> Box<dyn AsyncWrite + Unpin + Send> {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd as _;
        let out = std::io::stdout();
        let err = std::io::stderr();
        if !same_file(out.as_fd(), err.as_fd())
            && let Ok(fd) = out.as_fd().try_clone_to_owned()
            && let Ok(pipe) = tokio::net::unix::pipe::Sender::from_owned_fd(fd)
        {
            return Box::new(pipe);
        }
    }
    Box::new(tokio::io::stdout())
}

/// Whether two descriptors name the same file (or either cannot be looked at: then assume so).
#[cfg(unix)]
fn same_file(a: std::os::fd::BorrowedFd<'_>, b: std::os::fd::BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let id = |fd: std::os::fd::BorrowedFd<'_>| {
        let file = std::fs::File::from(fd.try_clone_to_owned().ok()?);
        let m = file.metadata().ok()?;
        Some((m.dev(), m.ino()))
    };
    match (id(a), id(b)) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}
