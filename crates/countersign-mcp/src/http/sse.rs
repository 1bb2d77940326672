//! Server-sent events from the upstream, cut into whole events as they arrive.

/// Whether a whole event has an `id` field (a line `id` or `id:…`): the client can resume the
/// stream after it.
pub(super) fn has_event_id(event: &[u8]) -> bool {
    event
        .split(|&b| b == b'\n' || b == b'\r')
        .any(|line| line == b"id" || line.starts_with(b"id:"))
}

/// Cuts an SSE byte stream into whole events (each ending with its blank line), keeping every
/// byte; line ends may be `\n`, `\r\n` or `\r`, and may be split across chunks.
#[derive(Debug, Default)]
pub(super) struct SseSplitter {
    buf: Vec<u8>,
    scanned: usize,
    line_start: usize,
}

impl SseSplitter {
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut i = self.scanned;
        while let Some(&b) = self.buf.get(i) {
            if b != b'\n' && b != b'\r' {
                i += 1;
                continue;
            }
            let end_len = if b == b'\r' {
                // A `\r` at the end of what arrived may be the first half of `\r\n`.
                match self.buf.get(i + 1) {
                    None => break,
                    Some(b'\n') => 2,
                    Some(_) => 1,
                }
            } else {
                1
            };
            let empty = i == self.line_start;
            i += end_len;
            self.line_start = i;
            if empty {
                let rest = self.buf.split_off(i);
                events.push(std::mem::replace(&mut self.buf, rest));
                i = 0;
                self.line_start = 0;
            }
        }
        self.scanned = i;
        events
    }

    /// What is left when the stream ends (an event without its blank line).
    pub(super) fn finish(self) -> Option<Vec<u8>> {
        (!self.buf.is_empty()).then_some(self.buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    fn split_all(chunks: &[&[u8]]) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
        let mut s = SseSplitter::default();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(s.push(c));
        }
        (out, s.finish())
    }

    #[test]
    fn events_are_cut_at_blank_lines_whatever_the_chunks() {
        let stream = b"id: 1\ndata: {\"a\":1}\n\n: ping\r\n\r\ndata: x\rdata: y\r\rdata: z\n\n";
        let whole = split_all(&[stream]);
        assert_eq!(
            whole.0,
            vec![
                b"id: 1\ndata: {\"a\":1}\n\n".to_vec(),
                b": ping\r\n\r\n".to_vec(),
                b"data: x\rdata: y\r\r".to_vec(),
                b"data: z\n\n".to_vec(),
            ]
        );
        assert_eq!(whole.1, None);
        // Byte by byte: the same events, every byte kept (a `\r\n` split in two included).
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(split_all(&bytes), whole);
    }

    #[test]
    fn an_unfinished_event_is_kept_for_the_end() {
        let (events, rest) = split_all(&[b"data: 1\n\ndata: 2\n"]);
        assert_eq!(events, vec![b"data: 1\n\n".to_vec()]);
        assert_eq!(rest, Some(b"data: 2\n".to_vec()));
    }
}
