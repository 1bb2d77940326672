//! An RFC 9162 (§2.1) Merkle tree over the audit log's lines, beside the hash chain.
//!
//! Leaf `i` (0-based) is line `seq = i + 1`: its hash is `SHA-256(0x00 || line bytes)` (the line
//! without its newline, as the chain hashes it), an interior node is `SHA-256(0x01 || left ||
//! right)`, and the tree of `n` lines splits at the largest power of two below `n`. The chain
//! lets a reader of the whole file check it; the tree lets a holder of one line check that it is
//! in a log of `n` lines with `O(log n)` hashes (inclusion), and lets anyone check that a log of
//! `m` lines is a prefix of a log of `n` lines (consistency), which is what a witness needs.
//!
//! A tree is the hashes of its complete, aligned subtrees (about two per line); a root or a proof
//! for any size up to the tree's is computed from `O(log n)` of them, whether they are held in
//! memory ([`MerkleTree`]) or read from the stored-hash file ([`crate::hashfile::StoredTree`],
//! what the service uses, with only the [`Frontier`] in memory). The verifiers
//! ([`verify_inclusion`], [`verify_consistency`]) are the RFC's algorithms and need no tree.

use sha2::{Digest as _, Sha256};

/// A 32-byte SHA-256 value.
pub type Hash = [u8; 32];

/// The root of the empty tree: SHA-256 of nothing.
pub fn empty_root() -> Hash {
    Sha256::digest([]).into()
}

/// A leaf's hash: `SHA-256(0x00 || bytes)`.
pub fn leaf_hash(bytes: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(bytes);
    h.finalize().into()
}

/// An interior node's hash: `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// Why a proof cannot be made or does not verify.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    /// The sizes or the index asked for are out of range (`index < size <= tree size`,
    /// `from <= to <= tree size`).
    #[error("out of range: {0}")]
    OutOfRange(String),
    /// The proof has the wrong number of hashes for its sizes.
    #[error("the proof has {found} hashes where sizes {sizes} need {expected}")]
    WrongLength {
        sizes: String,
        expected: usize,
        found: usize,
    },
    /// The proof's hashes do not lead to the expected root(s).
    #[error("the proof does not lead to the expected root: {0}")]
    Mismatch(&'static str),
    /// A stored subtree hash could not be read (the hash file failed or is short).
    #[error("stored hash unreadable: {0}")]
    Storage(String),
}

/// The largest power of two strictly below `n` (`n >= 2`).
fn split(n: u64) -> u64 {
    1u64 << (63 - (n - 1).leading_zeros())
}

/// Where a tree's complete, aligned subtree hashes come from: memory ([`MerkleTree`]) or the
/// stored-hash file ([`crate::hashfile::StoredTree`]). Roots and proofs are computed from these
/// alone, by the same code for both.
pub(crate) trait Subtrees {
    /// The number of leaves.
    fn leaves(&self) -> u64;
    /// The hash of leaves `index·2^level .. (index+1)·2^level`, all of them in the tree.
    fn complete(&self, level: u32, index: u64) -> Result<Hash, ProofError>;
}

/// The hash of leaves `lo..hi` as RFC 9162 defines a subtree (`lo < hi <= size`, `lo` a
/// multiple of the power of two at or above `hi - lo`, as every subtree in MTH, PATH and PROOF
/// is): the complete blocks of `hi - lo`'s binary decomposition, largest first, folded from the
/// right. At most 64 hashes are read.
fn subtree<S: Subtrees + ?Sized>(tree: &S, lo: u64, hi: u64) -> Result<Hash, ProofError> {
    let n = hi.saturating_sub(lo);
    let mut blocks = Vec::with_capacity(n.count_ones() as usize);
    let mut start = lo;
    for level in (0..64u32).rev() {
        if (n >> level) & 1 == 1 {
            blocks.push(tree.complete(level, start >> level)?);
            start += 1u64 << level;
        }
    }
    let mut from_right = blocks.into_iter().rev();
    let Some(mut hash) = from_right.next() else {
        // Unreachable for valid arguments (a subtree has at least one leaf).
        return Ok(empty_root());
    };
    for left in from_right {
        hash = node_hash(&left, &hash);
    }
    Ok(hash)
}

/// MTH of the first `size` leaves.
pub(crate) fn root_of<S: Subtrees + ?Sized>(tree: &S, size: u64) -> Result<Hash, ProofError> {
    if size > tree.leaves() {
        return Err(ProofError::OutOfRange(format!(
            "size {size} is beyond the tree's {} leaves",
            tree.leaves()
        )));
    }
    if size == 0 {
        return Ok(empty_root());
    }
    subtree(tree, 0, size)
}

/// PATH(index, D[size]), leaf-side first.
pub(crate) fn inclusion_of<S: Subtrees + ?Sized>(
    tree: &S,
    index: u64,
    size: u64,
) -> Result<Vec<Hash>, ProofError> {
    if index >= size || size > tree.leaves() {
        return Err(ProofError::OutOfRange(format!(
            "leaf {index} of a tree of {size} (the log has {} lines)",
            tree.leaves()
        )));
    }
    let mut proof = Vec::new();
    path(tree, index, 0, size, &mut proof)?;
    proof.reverse();
    Ok(proof)
}

/// Pushes PATH(m, D[lo:hi]) root-side first (reversed by the caller).
fn path<S: Subtrees + ?Sized>(
    tree: &S,
    m: u64,
    lo: u64,
    hi: u64,
    out: &mut Vec<Hash>,
) -> Result<(), ProofError> {
    let n = hi - lo;
    if n <= 1 {
        return Ok(());
    }
    let k = split(n);
    if m < k {
        out.push(subtree(tree, lo + k, hi)?);
        path(tree, m, lo, lo + k, out)
    } else {
        out.push(subtree(tree, lo, lo + k)?);
        path(tree, m - k, lo + k, hi, out)
    }
}

/// PROOF(from, D[to]), empty when `from` is 0 or equals `to`.
pub(crate) fn consistency_of<S: Subtrees + ?Sized>(
    tree: &S,
    from: u64,
    to: u64,
) -> Result<Vec<Hash>, ProofError> {
    if from > to || to > tree.leaves() {
        return Err(ProofError::OutOfRange(format!(
            "from {from} to {to} (the log has {} lines)",
            tree.leaves()
        )));
    }
    let mut proof = Vec::new();
    if from > 0 && from < to {
        subproof(tree, from, 0, to, true, &mut proof)?;
    }
    proof.reverse();
    Ok(proof)
}

/// Pushes SUBPROOF(m, D[lo:hi], whole) root-side first.
fn subproof<S: Subtrees + ?Sized>(
    tree: &S,
    m: u64,
    lo: u64,
    hi: u64,
    whole: bool,
    out: &mut Vec<Hash>,
) -> Result<(), ProofError> {
    let n = hi - lo;
    if m == n {
        if !whole {
            out.push(subtree(tree, lo, hi)?);
        }
        return Ok(());
    }
    if n <= 1 {
        return Ok(());
    }
    let k = split(n);
    if m <= k {
        out.push(subtree(tree, lo + k, hi)?);
        subproof(tree, m, lo, lo + k, whole, out)
    } else {
        out.push(subtree(tree, lo, lo + k)?);
        subproof(tree, m - k, lo + k, hi, false, out)
    }
}

/// Position of a complete subtree's hash in the stored-hash sequence (the layout of Go's
/// `golang.org/x/mod/sumdb/tlog`, `StoredHashIndex`): leaf `n`'s hash is followed by the hashes
/// of the subtrees it completes, lowest first, so every hash is stored once, as soon as it is
/// known, and never moves.
pub fn stored_hash_index(level: u32, index: u64) -> u64 {
    // Level L's n-th hash follows level L-1's (2n+1)-th: walk down to level 0's ordering.
    let mut n = index;
    for _ in 0..level {
        n = n.saturating_mul(2).saturating_add(1);
    }
    // Level 0's n-th hash is at n + n/2 + n/4 + ...
    let mut at = 0u64;
    while n > 0 {
        at = at.saturating_add(n);
        n >>= 1;
    }
    at.saturating_add(u64::from(level))
}

/// How many hashes a tree of `leaves` leaves stores: `2·leaves − popcount(leaves)`.
pub fn stored_hash_count(leaves: u64) -> u64 {
    leaves
        .saturating_mul(2)
        .saturating_sub(u64::from(leaves.count_ones()))
}

/// The right edge of a tree: the hashes of the complete subtrees its size decomposes into
/// (one per set bit of the size, at most 64), which is all that appending a leaf or computing
/// the current root needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frontier {
    size: u64,
    /// Largest subtree first.
    hashes: Vec<Hash>,
}

impl Frontier {
    /// The empty tree's edge.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Append a leaf by its hash.
    pub fn push(&mut self, leaf: Hash) {
        self.push_with(leaf, |_| {});
    }

    /// Append a leaf, handing `stored` the hashes this leaf adds to the stored-hash sequence,
    /// in order: the leaf, then each subtree it completes.
    pub fn push_with(&mut self, leaf: Hash, mut stored: impl FnMut(Hash)) {
        stored(leaf);
        let mut hash = leaf;
        let mut size = self.size;
        while size & 1 == 1 {
            let Some(left) = self.hashes.pop() else {
                break;
            };
            hash = node_hash(&left, &hash);
            stored(hash);
            size >>= 1;
        }
        self.hashes.push(hash);
        self.size += 1;
    }

    /// MTH of all leaves.
    pub fn root(&self) -> Hash {
        let mut from_right = self.hashes.iter().rev();
        let Some(mut hash) = from_right.next().copied() else {
            return empty_root();
        };
        for left in from_right {
            hash = node_hash(left, &hash);
        }
        hash
    }
}

/// The Merkle tree of a log's first lines, grown one line at a time, whole in memory (about
/// 64 bytes a leaf). The service keeps its tree in a file instead
/// ([`crate::hashfile::StoredTree`]); this one serves tools and tests, and is the reference the
/// file-backed tree is tested against.
#[derive(Debug, Clone, Default)]
pub struct MerkleTree {
    /// `levels[k][j]`: the hash of leaves `j·2^k .. (j+1)·2^k`, for every such complete block.
    levels: Vec<Vec<Hash>>,
}

impl Subtrees for MerkleTree {
    fn leaves(&self) -> u64 {
        self.size()
    }

    fn complete(&self, level: u32, index: u64) -> Result<Hash, ProofError> {
        self.levels
            .get(level as usize)
            .and_then(|row| row.get(usize::try_from(index).ok()?))
            .copied()
            .ok_or_else(|| ProofError::Storage(format!("no subtree {index} at level {level}")))
    }
}

impl MerkleTree {
    /// An empty tree.
    pub fn new() -> Self {
        Self::default()
    }

    /// The tree of the given lines (each without its newline).
    pub fn from_lines<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut tree = Self::new();
        for line in lines {
            tree.push(leaf_hash(line));
        }
        tree
    }

    /// The number of leaves.
    pub fn size(&self) -> u64 {
        self.levels.first().map_or(0, |l| l.len() as u64)
    }

    /// Append a leaf by its hash ([`leaf_hash`] of the line).
    pub fn push(&mut self, leaf: Hash) {
        let mut hash = leaf;
        let mut level = 0;
        loop {
            if self.levels.len() == level {
                self.levels.push(Vec::new());
            }
            let Some(row) = self.levels.get_mut(level) else {
                return;
            };
            row.push(hash);
            // An even count completes a block of the next level.
            if row.len() % 2 != 0 {
                return;
            }
            let (Some(left), Some(right)) = (row.get(row.len() - 2), row.last()) else {
                return;
            };
            hash = node_hash(left, right);
            level += 1;
        }
    }

    /// MTH of the first `size` leaves.
    pub fn root(&self, size: u64) -> Result<Hash, ProofError> {
        root_of(self, size)
    }

    /// PATH(index, D[size]): the audit path of leaf `index` in the tree of the first `size`
    /// leaves, leaf-side first.
    pub fn inclusion_proof(&self, index: u64, size: u64) -> Result<Vec<Hash>, ProofError> {
        inclusion_of(self, index, size)
    }

    /// PROOF(from, D[to]): the consistency proof between the trees of the first `from` and the
    /// first `to` leaves (empty when `from` is 0 or equals `to`).
    pub fn consistency_proof(&self, from: u64, to: u64) -> Result<Vec<Hash>, ProofError> {
        consistency_of(self, from, to)
    }
}

/// The number of hashes in PATH(index, D[size]).
fn inclusion_length(index: u64, size: u64) -> usize {
    let (mut lo, mut hi, mut m, mut len) = (0u64, size, index, 0usize);
    while hi - lo > 1 {
        let k = split(hi - lo);
        if m < k {
            hi = lo + k;
        } else {
            m -= k;
            lo += k;
        }
        len += 1;
    }
    len
}

/// RFC 9162 §2.1.3.2: whether `proof` shows leaf `index` (whose hash is `leaf`) in the tree of
/// `size` leaves whose root is `root`.
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf: &Hash,
    proof: &[Hash],
    root: &Hash,
) -> Result<(), ProofError> {
    if index >= size {
        return Err(ProofError::OutOfRange(format!(
            "leaf {index} is not in a tree of {size}"
        )));
    }
    let expected = inclusion_length(index, size);
    if proof.len() != expected {
        return Err(ProofError::WrongLength {
            sizes: format!("{index}/{size}"),
            expected,
            found: proof.len(),
        });
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return Err(ProofError::Mismatch("the path is longer than the tree"));
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(ProofError::Mismatch("the path is shorter than the tree"));
    }
    if r != *root {
        return Err(ProofError::Mismatch("the computed root differs"));
    }
    Ok(())
}

/// RFC 9162 §2.1.4.2: whether `proof` shows the tree of `from` leaves with root `from_root` to
/// be a prefix of the tree of `to` leaves with root `to_root`. A tree of 0 leaves is a prefix of
/// every tree (the proof must then be empty); equal sizes need equal roots and an empty proof.
pub fn verify_consistency(
    from: u64,
    to: u64,
    from_root: &Hash,
    to_root: &Hash,
    proof: &[Hash],
) -> Result<(), ProofError> {
    if from > to {
        return Err(ProofError::OutOfRange(format!(
            "a tree of {from} cannot be a prefix of a tree of {to}"
        )));
    }
    if from == 0 || from == to {
        if !proof.is_empty() {
            return Err(ProofError::WrongLength {
                sizes: format!("{from}->{to}"),
                expected: 0,
                found: proof.len(),
            });
        }
        if from == 0 {
            // Size 0 has exactly one root, on either side.
            return if *from_root == empty_root() && (to > 0 || *to_root == empty_root()) {
                Ok(())
            } else {
                Err(ProofError::Mismatch("size 0 has the empty tree's root"))
            };
        }
        return if from_root == to_root {
            Ok(())
        } else {
            Err(ProofError::Mismatch("equal sizes with different roots"))
        };
    }
    let Some((first, rest)) = proof.split_first() else {
        return Err(ProofError::WrongLength {
            sizes: format!("{from}->{to}"),
            expected: 1,
            found: 0,
        });
    };
    // A power-of-two `from` is a complete subtree: its root starts the path.
    let (start, path) = if from.is_power_of_two() {
        (from_root, proof)
    } else {
        (first, rest)
    };
    let (mut f, mut s) = (from - 1, to - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (*start, *start);
    for c in path {
        if s == 0 {
            return Err(ProofError::Mismatch("the proof is longer than the trees"));
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    if s != 0 {
        return Err(ProofError::Mismatch("the proof is shorter than the trees"));
    }
    if fr != *from_root {
        return Err(ProofError::Mismatch("the old root differs"));
    }
    if sr != *to_root {
        return Err(ProofError::Mismatch("the new root differs"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// MTH straight from RFC 9162's definition, with no cache: the reference the tree is checked
    /// against.
    fn mth(leaves: &[Vec<u8>]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaf_hash(&leaves[0]),
            n => {
                let k = split(n as u64) as usize;
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    fn hex(h: &Hash) -> String {
        h.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn leaves(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("line {i}").into_bytes()).collect()
    }

    fn tree(leaves: &[Vec<u8>]) -> MerkleTree {
        MerkleTree::from_lines(leaves.iter().map(Vec::as_slice))
    }

    #[test]
    fn known_answers_from_rfc_definitions() {
        // The empty tree's root is SHA-256 of nothing.
        assert_eq!(
            hex(&empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // Leaf and node prefixes: SHA-256(0x00) and SHA-256(0x01 || 0^64).
        assert_eq!(
            hex(&leaf_hash(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
        let d = leaves(7);
        let t = tree(&d);
        for n in 0..=7 {
            assert_eq!(t.root(n as u64), Ok(mth(&d[..n])));
        }
        assert!(t.root(8).is_err());
    }

    #[test]
    fn proofs_verify_for_every_pair_up_to_64() {
        let d = leaves(64);
        let t = tree(&d);
        for n in 1..=64u64 {
            let root = t.root(n).unwrap_or_default();
            for i in 0..n {
                let proof = t.inclusion_proof(i, n).unwrap_or_default();
                let leaf = leaf_hash(&d[i as usize]);
                assert_eq!(
                    verify_inclusion(i, n, &leaf, &proof, &root),
                    Ok(()),
                    "{i}/{n}"
                );
                // Another leaf, index or size fails.
                let other = leaf_hash(b"not in the log");
                assert!(verify_inclusion(i, n, &other, &proof, &root).is_err());
                // The path of a tree of n against the root of n + 1 lines. (Against the root of
                // n itself a wrong size can succeed: RFC 9162 binds the size through the signed
                // checkpoint that carries both, not through the path.)
                let bigger = tree(&leaves(n as usize + 1))
                    .root(n + 1)
                    .unwrap_or_default();
                assert!(verify_inclusion(i, n + 1, &leaf, &proof, &bigger).is_err());
                if n > 1 {
                    assert!(verify_inclusion((i + 1) % n, n, &leaf, &proof, &root).is_err());
                }
            }
            for m in 0..=n {
                let old = t.root(m).unwrap_or_default();
                let proof = t.consistency_proof(m, n).unwrap_or_default();
                assert_eq!(
                    verify_consistency(m, n, &old, &root, &proof),
                    Ok(()),
                    "{m}->{n}"
                );
                if m > 0 && m < n {
                    // A fork: the same sizes, another old root.
                    let forked = node_hash(&old, &old);
                    assert!(verify_consistency(m, n, &forked, &root, &proof).is_err());
                    assert!(verify_consistency(m, n, &old, &forked, &proof).is_err());
                }
            }
        }
    }

    #[test]
    fn out_of_range_requests_are_errors_not_panics() {
        let t = tree(&leaves(5));
        assert!(t.inclusion_proof(5, 5).is_err());
        assert!(t.inclusion_proof(0, 6).is_err());
        assert!(t.inclusion_proof(0, 0).is_err());
        assert!(t.consistency_proof(4, 3).is_err());
        assert!(t.consistency_proof(0, 6).is_err());
        let root = t.root(5).unwrap_or_default();
        assert!(verify_inclusion(5, 5, &root, &[], &root).is_err());
        assert!(verify_consistency(6, 5, &root, &root, &[]).is_err());
        assert!(verify_consistency(3, 5, &root, &root, &[]).is_err());
        // Equal sizes: equal roots and no proof.
        assert!(verify_consistency(5, 5, &root, &root, &[]).is_ok());
        assert!(verify_consistency(5, 5, &root, &empty_root(), &[]).is_err());
        assert!(verify_consistency(5, 5, &root, &root, &[root]).is_err());
        // Size 0: the empty root, no proof.
        assert!(verify_consistency(0, 5, &empty_root(), &root, &[]).is_ok());
        assert!(verify_consistency(0, 5, &root, &root, &[]).is_err());
        assert!(verify_consistency(0, 0, &empty_root(), &empty_root(), &[]).is_ok());
        assert!(verify_consistency(0, 0, &empty_root(), &root, &[]).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Any altered byte of an inclusion proof, or of the leaf, fails.
        #[test]
        fn any_altered_inclusion_byte_fails(
            n in 2u64..300, i in 0u64..300, at in 0usize..10_000, bit in 0u8..8,
        ) {
            let i = i % n;
            let d = leaves(n as usize);
            let t = tree(&d);
            let root = t.root(n).unwrap_or_default();
            let mut proof = t.inclusion_proof(i, n).unwrap_or_default();
            let leaf = leaf_hash(&d[i as usize]);
            prop_assert_eq!(verify_inclusion(i, n, &leaf, &proof, &root), Ok(()));
            let byte = at % (proof.len() * 32);
            proof[byte / 32][byte % 32] ^= 1 << bit;
            prop_assert!(verify_inclusion(i, n, &leaf, &proof, &root).is_err());
        }

        /// Any altered byte of a consistency proof fails.
        #[test]
        fn any_altered_consistency_byte_fails(
            n in 2u64..300, m in 1u64..300, at in 0usize..10_000, bit in 0u8..8,
        ) {
            let m = 1 + m % (n - 1);
            let d = leaves(n as usize);
            let t = tree(&d);
            let (old, new) = (t.root(m).unwrap_or_default(), t.root(n).unwrap_or_default());
            let mut proof = t.consistency_proof(m, n).unwrap_or_default();
            prop_assert_eq!(verify_consistency(m, n, &old, &new, &proof), Ok(()));
            let byte = at % (proof.len() * 32);
            proof[byte / 32][byte % 32] ^= 1 << bit;
            prop_assert!(verify_consistency(m, n, &old, &new, &proof).is_err());
        }

        /// The cached tree and the right edge alone agree with the definition for every size.
        #[test]
        fn roots_match_the_definition(n in 0usize..200) {
            let d = leaves(n);
            prop_assert_eq!(tree(&d).root(n as u64), Ok(mth(&d)));
            let mut edge = Frontier::new();
            for line in &d {
                edge.push(leaf_hash(line));
            }
            prop_assert_eq!(edge.size(), n as u64);
            prop_assert_eq!(edge.root(), mth(&d));
            // At most one hash per set bit of the size is held.
            prop_assert_eq!(edge.hashes.len(), n.count_ones() as usize);
        }
    }
}
