//! The service's audit Merkle tree, kept in a file so that its memory stays flat.
//!
//! File layout (`audit.merkle` beside `audit.jsonl`; docs/spec/service.md §Merkle hash file):
//! a 32-byte header ([`HEADER`]), then 32-byte hashes in the stored-hash order of Go's
//! `golang.org/x/mod/sumdb/tlog`: when leaf `n` arrives, its leaf hash and then the hash of every
//! subtree it completes (lowest first) are appended, so a tree of `n` leaves is exactly
//! [`stored_hash_count`]`(n) = 2n − popcount(n)` hashes and the subtree at `(level, index)` is at
//! [`stored_hash_index`]. Only the right edge ([`Frontier`], at most 64 hashes) is in memory;
//! a root or proof reads `O(log n)` hashes by offset.
//!
//! The file is a cache of what the audit lines determine, never a source of truth: a process
//! trusts none of it until [`StoredTree::extend`] has recomputed each hash from the log's lines
//! and compared it with the file. A missing file is written, a short or torn one is completed,
//! and one that disagrees (stale, from another log, edited) is rewritten from the first hash
//! that differs, which `extend` reports so it can be logged.

use crate::merkle::{
    Frontier, Hash, ProofError, Subtrees, consistency_of, inclusion_of, root_of, stored_hash_count,
    stored_hash_index,
};
use std::fs::File;
use std::io;
use std::path::Path;

/// The first 32 bytes of the file: its format. A file with another header is rewritten.
pub const HEADER: &[u8; 32] = b"countersign.audit-merkle/1\n\n\n\n\n\n";
const HASH_LEN: u64 = 32;

/// A Merkle tree whose subtree hashes live in a file, verified against the log as it grows.
#[derive(Debug)]
pub struct StoredTree {
    file: File,
    /// The verified tree's right edge; its size is the tree's size.
    frontier: Frontier,
    /// Whole hashes in the file after the header, verified or not.
    stored: u64,
}

/// What [`StoredTree::extend`] did with the hashes already in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extended {
    /// Hashes that were in the file and matched the recomputation.
    pub matched: u64,
    /// The position of the first stored hash that differed from the recomputation, if one did:
    /// the file was rewritten from there.
    pub rewritten_from: Option<u64>,
}

impl StoredTree {
    /// Open (or create) the hash file at `path`. Nothing in it counts until `extend` has checked
    /// it against the log.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        Self::from_file(file)
    }

    /// A tree in an unnamed temporary file (for a service without a data directory): created,
    /// then unlinked at once where the system allows, so it goes away with the process.
    pub fn temporary() -> io::Result<Self> {
        let suffix = crate::random_bytes::<12>().map_err(io::Error::other)?;
        let name: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
        let path = std::env::temp_dir().join(format!("countersign-merkle-{name}"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        // Unlinking an open file is allowed on Unix; elsewhere it stays until the system's
        // temporary-file cleanup.
        let _ = std::fs::remove_file(&path);
        Self::from_file(file)
    }

    fn from_file(file: File) -> io::Result<Self> {
        let len = file.metadata()?.len();
        let mut header = [0u8; 32];
        let ok = len >= HASH_LEN && read_at(&file, &mut header, 0).is_ok() && header == *HEADER;
        if !ok {
            if len > 0 {
                tracing::warn!("the Merkle hash file has no valid header; rewriting it");
            }
            file.set_len(0)?;
            write_at(&file, HEADER, 0)?;
        }
        let stored = if ok { len / HASH_LEN - 1 } else { 0 };
        Ok(Self {
            file,
            frontier: Frontier::new(),
            stored,
        })
    }

    /// The number of leaves checked against (or written from) the log.
    pub fn size(&self) -> u64 {
        self.frontier.size()
    }

    /// Append leaves (the [`crate::merkle::leaf_hash`]es of the next lines of the log): their
    /// stored hashes are recomputed, compared with those the file already has at their
    /// positions, and written from the first position that is missing or differs. On an error
    /// (disk full) the tree is unchanged and the file holds at least its hashes.
    pub fn extend(&mut self, leaves: &[Hash]) -> io::Result<Extended> {
        let mut frontier = self.frontier.clone();
        let mut computed = Vec::with_capacity(leaves.len() * 2);
        for leaf in leaves {
            frontier.push_with(*leaf, |h| computed.push(h));
        }
        let first = stored_hash_count(self.frontier.size());
        let total = computed.len() as u64;
        // Compare with what the file has at these positions, in one read.
        let available = self.stored.saturating_sub(first).min(total);
        let mut on_file =
            vec![0u8; usize::try_from(available * HASH_LEN).map_err(io::Error::other)?];
        read_at(&self.file, &mut on_file, offset(first))?;
        let matched = on_file
            .chunks_exact(32)
            .zip(&computed)
            .take_while(|(a, b)| *a == b.as_slice())
            .count() as u64;
        let rewritten_from = (matched < available).then_some(first + matched);
        if matched < total {
            let from = first + matched;
            let bytes: Vec<u8> = computed
                .iter()
                .skip(usize::try_from(matched).map_err(io::Error::other)?)
                .flatten()
                .copied()
                .collect();
            // Cut whatever follows (a torn hash, a stale or foreign tail) before writing.
            self.file.set_len(offset(from))?;
            self.stored = from;
            if let Err(e) = write_at(&self.file, &bytes, offset(from)) {
                let _ = self.file.set_len(offset(from));
                return Err(e);
            }
            self.stored = first + total;
        }
        self.frontier = frontier;
        Ok(Extended {
            matched,
            rewritten_from,
        })
    }

    /// MTH of the first `size` leaves (the current root comes from memory).
    pub fn root(&self, size: u64) -> Result<Hash, ProofError> {
        if size == self.size() {
            return Ok(self.frontier.root());
        }
        root_of(self, size)
    }

    /// PATH(index, D[size]), leaf-side first.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, ProofError> {
        inclusion_of(self, index, size)
    }

    /// PROOF(from, D[to]).
    pub fn consistency_proof(&self, from: u64, to: u64) -> Result<Vec<Hash>, ProofError> {
        consistency_of(self, from, to)
    }
}

impl Subtrees for StoredTree {
    fn leaves(&self) -> u64 {
        self.size()
    }

    fn complete(&self, level: u32, index: u64) -> Result<Hash, ProofError> {
        let at = stored_hash_index(level, index);
        if at >= stored_hash_count(self.size()) {
            return Err(ProofError::Storage(format!(
                "subtree {index} at level {level} is beyond the tree"
            )));
        }
        let mut hash = [0u8; 32];
        read_at(&self.file, &mut hash, offset(at))
            .map_err(|e| ProofError::Storage(format!("reading stored hash {at}: {e}")))?;
        Ok(hash)
    }
}

/// The byte offset of stored hash `index`.
fn offset(index: u64) -> u64 {
    index.saturating_add(1).saturating_mul(HASH_LEN)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, at)
}

#[cfg(unix)]
fn write_at(file: &File, buf: &[u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, buf, at)
}

#[cfg(windows)]
fn read_at(file: &File, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_read(file, buf, at)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => {
                buf = &mut buf[n..];
                at += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(windows)]
fn write_at(file: &File, mut buf: &[u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match std::os::windows::fs::FileExt::seek_write(file, buf, at)? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => {
                buf = &buf[n..];
                at += n as u64;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::{MerkleTree, leaf_hash};
    use proptest::prelude::*;

    fn leaves(n: usize, salt: &str) -> Vec<Hash> {
        (0..n)
            .map(|i| leaf_hash(format!("{salt} line {i}").as_bytes()))
            .collect()
    }

    fn reference(leaves: &[Hash]) -> MerkleTree {
        let mut t = MerkleTree::new();
        for l in leaves {
            t.push(*l);
        }
        t
    }

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "countersign-hashfile-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_default();
        dir.join("audit.merkle")
    }

    /// Every root and proof of `tree` equals the in-memory reference's, for every size.
    fn assert_same(tree: &StoredTree, reference: &MerkleTree) {
        let n = reference.size();
        assert_eq!(tree.size(), n);
        for size in 0..=n {
            assert_eq!(tree.root(size), reference.root(size), "root {size}");
            for i in 0..size {
                assert_eq!(
                    tree.inclusion_proof(i, size),
                    reference.inclusion_proof(i, size),
                    "inclusion {i}/{size}"
                );
            }
            for m in 0..=size {
                assert_eq!(
                    tree.consistency_proof(m, size),
                    reference.consistency_proof(m, size),
                    "consistency {m}->{size}"
                );
            }
        }
        assert!(tree.root(n + 1).is_err());
        assert!(tree.inclusion_proof(0, n + 1).is_err());
    }

    #[test]
    fn the_layout_is_tlogs_stored_hash_order() {
        // tlog: leaf 0, leaf 1, node(0..2), leaf 2, leaf 3, node(2..4), node(0..4), leaf 4.
        assert_eq!(stored_hash_index(0, 0), 0);
        assert_eq!(stored_hash_index(0, 1), 1);
        assert_eq!(stored_hash_index(1, 0), 2);
        assert_eq!(stored_hash_index(0, 2), 3);
        assert_eq!(stored_hash_index(0, 3), 4);
        assert_eq!(stored_hash_index(1, 1), 5);
        assert_eq!(stored_hash_index(2, 0), 6);
        assert_eq!(stored_hash_index(0, 4), 7);
        for (n, count) in [(0, 0), (1, 1), (2, 3), (3, 4), (4, 7), (5, 8), (8, 15)] {
            assert_eq!(stored_hash_count(n), count, "{n} leaves");
        }
        let path = scratch("layout");
        let d = leaves(5, "a");
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
        let bytes = std::fs::read(&path).unwrap_or_default();
        assert_eq!(bytes.len(), 32 * (1 + 8));
        assert_eq!(&bytes[..32], HEADER);
        let reference = reference(&d);
        let at = |i: usize| &bytes[32 * (i + 1)..32 * (i + 2)];
        assert_eq!(at(6), reference.root(4).unwrap_or_default());
        assert_eq!(at(7), d[4]);
    }

    #[test]
    fn proofs_from_the_file_equal_the_in_memory_reference_up_to_70_leaves() {
        let path = scratch("equal");
        let d = leaves(70, "b");
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        // Grown in uneven batches, as the service grows it.
        for chunk in d.chunks(9) {
            tree.extend(chunk).unwrap_or_else(|e| panic!("{e}"));
        }
        assert_same(&tree, &reference(&d));
    }

    #[test]
    fn a_reopened_file_is_checked_not_rewritten() {
        let path = scratch("reopen");
        let d = leaves(40, "c");
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        tree.extend(&d[..33]).unwrap_or_else(|e| panic!("{e}"));
        drop(tree);
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        // Nothing counts before the log is replayed.
        assert_eq!(tree.size(), 0);
        assert!(tree.root(1).is_err());
        let done = tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done.matched, stored_hash_count(33));
        assert_eq!(done.rewritten_from, None);
        assert_same(&tree, &reference(&d));
    }

    #[test]
    fn a_torn_or_short_file_is_completed() {
        let path = scratch("torn");
        let d = leaves(37, "d");
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
        drop(tree);
        let full = std::fs::read(&path).unwrap_or_default();
        // Cut in the middle of a hash (a crash during an append), then at a hash boundary.
        for cut in [full.len() - 45, 32 * 20, 32, 0] {
            std::fs::write(&path, &full[..cut]).unwrap_or_default();
            let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
            let done = tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(done.rewritten_from, None, "cut at {cut}");
            assert_same(&tree, &reference(&d));
            drop(tree);
            assert_eq!(
                std::fs::read(&path).unwrap_or_default(),
                full,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn a_tampered_or_foreign_file_is_detected_and_rewritten() {
        let path = scratch("tamper");
        let d = leaves(50, "e");
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
        drop(tree);
        let full = std::fs::read(&path).unwrap_or_default();
        // One flipped bit in stored hash 17 (an interior node no root of 50 leaves reads).
        let mut edited = full.clone();
        edited[32 * 18 + 5] ^= 0x10;
        std::fs::write(&path, &edited).unwrap_or_default();
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let done = tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done.rewritten_from, Some(17));
        assert_same(&tree, &reference(&d));
        drop(tree);
        assert_eq!(std::fs::read(&path).unwrap_or_default(), full);
        // The file of another log (same length): rewritten from its first hash.
        let foreign = scratch("foreign");
        let mut other = StoredTree::open(&foreign).unwrap_or_else(|e| panic!("{e}"));
        other
            .extend(&leaves(50, "other"))
            .unwrap_or_else(|e| panic!("{e}"));
        drop(other);
        std::fs::copy(&foreign, &path).unwrap_or_default();
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let done = tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done.rewritten_from, Some(0));
        assert_same(&tree, &reference(&d));
        // A file longer than the log: its first hashes serve, the rest waits to be checked.
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        tree.extend(&d[..20]).unwrap_or_else(|e| panic!("{e}"));
        assert_same(&tree, &reference(&d[..20]));
        // A wrong header: the file is started over.
        std::fs::write(&path, b"not a hash file").unwrap_or_default();
        let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let done = tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(done.matched, 0);
        assert_same(&tree, &reference(&d));
    }

    #[test]
    fn a_temporary_tree_works_like_a_named_one() {
        let d = leaves(23, "f");
        let mut tree = StoredTree::temporary().unwrap_or_else(|e| panic!("{e}"));
        tree.extend(&d).unwrap_or_else(|e| panic!("{e}"));
        assert_same(&tree, &reference(&d));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// Any number of leaves up to 70, grown in any batches: every root and proof for every
        /// (index, size) equals the in-memory reference's.
        #[test]
        fn file_backed_proofs_equal_the_reference(
            n in 0usize..=70, batch in 1usize..20, case in 0u32..1_000_000,
        ) {
            let path = scratch(&format!("prop-{case}"));
            let d = leaves(n, &case.to_string());
            let mut tree = StoredTree::open(&path).unwrap_or_else(|e| panic!("{e}"));
            for chunk in d.chunks(batch) {
                tree.extend(chunk).unwrap_or_else(|e| panic!("{e}"));
            }
            assert_same(&tree, &reference(&d));
            let _ = std::fs::remove_dir_all(path.parent().unwrap_or(&path));
        }
    }
}
