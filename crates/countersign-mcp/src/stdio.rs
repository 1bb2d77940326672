//! The interposer's own stdin and stdout as async pipes, and how a line is cut from the client's
//! byte stream ([`read_frame`]).
//!
//! Tokio's `stdin()` and `stdout()` hand every read and every write to a blocking thread and wait
//! for it: two thread hand-offs per relayed call, on a path whose whole budget is a few
//! microseconds of CPU. When the agent host gave the interposer pipes (the usual case), they are
//! read and written in the runtime instead, non-blocking. Anything else (a terminal, a file, a
//! socket), and stdout when stderr is the same pipe (making it non-blocking would make the
//! interposer's and the upstream's stderr non-blocking too), keeps tokio's.

use crate::admission::{self, Rejection};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncRead, AsyncWrite};

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

/// Read one line of at most [`admission::MAX_FRAME_BYTES`] into `frame` (cleared first), without
/// its LF or the CR of a CRLF (every common reader ends a line so). `None` at the end of input;
/// `Some(Err(..))` for a line past the cap, read to its end and dropped.
pub(crate) async fn read_frame<R: AsyncBufRead + Unpin>(
    input: &mut R,
    frame: &mut Vec<u8>,
) -> std::io::Result<Option<Result<(), Rejection>>> {
    frame.clear();
    let (mut bytes, mut any) = (0usize, false);
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            if !any {
                return Ok(None);
            }
            break;
        }
        any = true;
        let end = available.iter().position(|b| *b == b'\n');
        let chunk = available
            .get(..end.unwrap_or(available.len()))
            .unwrap_or_default();
        bytes = bytes.saturating_add(chunk.len());
        // One byte of slack for the CR of a CRLF; past that, only the count goes on.
        if bytes <= admission::MAX_FRAME_BYTES + 1 {
            frame.extend_from_slice(chunk);
        }
        let used = chunk.len() + usize::from(end.is_some());
        input.consume(used);
        if end.is_some() {
            break;
        }
    }
    if frame.last() == Some(&b'\r') && bytes <= admission::MAX_FRAME_BYTES + 1 {
        frame.pop();
        bytes -= 1;
    }
    if bytes > admission::MAX_FRAME_BYTES {
        frame.clear();
        return Ok(Some(Err(Rejection::TooLarge {
            bytes,
            max: admission::MAX_FRAME_BYTES,
        })));
    }
    Ok(Some(Ok(())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as `read_frame` cuts them from a byte stream, in whatever pieces it arrives.
    async fn frames(input: &[u8]) -> Vec<Result<Vec<u8>, &'static str>> {
        let mut reader = tokio::io::BufReader::with_capacity(3, input);
        let mut frame = Vec::new();
        let mut out = Vec::new();
        while let Some(read) = read_frame(&mut reader, &mut frame).await.unwrap() {
            out.push(read.map(|()| frame.clone()).map_err(|e| e.reason()));
        }
        out
    }

    #[tokio::test]
    async fn a_frame_ends_at_lf_and_only_a_crlf_loses_its_cr() {
        let read = frames(b"{\"a\":1}\r\n{\"b\":2}\n\r{\"c\":3}\r\n\nlast").await;
        let want: Vec<Result<Vec<u8>, &str>> = vec![
            Ok(b"{\"a\":1}".to_vec()),
            Ok(b"{\"b\":2}".to_vec()),
            // A CR that ends no line stays: admission refuses the frame that carries it.
            Ok(b"\r{\"c\":3}".to_vec()),
            Ok(Vec::new()),
            Ok(b"last".to_vec()),
        ];
        assert_eq!(read, want);
        assert!(frames(b"").await.is_empty());
    }

    #[tokio::test]
    async fn a_line_past_the_cap_is_dropped_whole_and_the_next_one_read() {
        let mut input = vec![b'x'; admission::MAX_FRAME_BYTES + 1];
        input.extend_from_slice(b"\n{}\n");
        let read = frames(&input).await;
        assert_eq!(read, vec![Err("frame_too_large"), Ok(b"{}".to_vec())]);
        // Exactly at the cap, with a CRLF: admitted length.
        let mut input = vec![b'x'; admission::MAX_FRAME_BYTES];
        input.extend_from_slice(b"\r\n");
        let read = frames(&input).await;
        assert_eq!(read.len(), 1);
        assert_eq!(
            read[0].as_ref().map(Vec::len),
            Ok(admission::MAX_FRAME_BYTES)
        );
    }
}
