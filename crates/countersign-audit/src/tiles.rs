//! The audit log's Merkle tree as C2SP tlog-tiles (<https://c2sp.org/tlog-tiles>, text of
//! C2SP/C2SP commit 5ba5ee8, tag `tlog-tiles/v0.1.0` plus its later editorial changes).
//!
//! A tile is 1 to 256 consecutive hashes of one "tile level": level `L` holds the hashes of the
//! complete subtrees of `256^L` leaves, so level-`L` tile `N`'s `i`-th hash is the RFC 6962
//! subtree hash at Merkle height `8·L` and index `N·256 + i`. That is exactly what the stored
//! tree already keeps ([`crate::merkle`]'s complete subtrees, the layout of Go's
//! `golang.org/x/mod/sumdb/tlog`): a tile is read from the same hashes that answer inclusion and
//! consistency proofs, never from a second tree. An entry bundle holds the log entries of a
//! level-0 tile: here an entry is an audit line's bytes without its newline, the bytes whose
//! RFC 6962 leaf hash the checkpoints commit to.
//!
//! Paths (the part after the log's prefix): `tile/<L>/<N>[.p/<W>]` and
//! `tile/entries/<N>[.p/<W>]`, `N` in 3-digit groups all but the last prefixed with `x`
//! (`1234067` is `x001/x234/067`). Only the canonical spelling parses, so one tile has one URL.

use crate::hashfile::StoredTree;
use crate::merkle::{MerkleTree, ProofError, Subtrees};

/// Hashes in a full tile.
pub const TILE_WIDTH: u64 = 256;
/// Merkle levels a tile level spans (`256 = 2^8`).
const TILE_HEIGHT: u32 = 8;
/// The highest level the spec allows in a path.
const MAX_LEVEL: u8 = 63;
/// The longest entry an entry bundle can hold (a big-endian u16 length prefix).
pub const MAX_ENTRY: usize = u16::MAX as usize;

/// What a tile holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TileKind {
    /// Merkle tree hashes at this tile level (0: leaf hashes).
    Hashes { level: u8 },
    /// The log entries of level-0 tile `index`.
    Entries,
}

/// One tile: its kind, its index within its level, and its width (256: full).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tile {
    pub kind: TileKind,
    pub index: u64,
    /// 1..=256.
    pub width: u16,
}

/// Why a tile cannot be named or served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TileError {
    /// The path is not a canonical tlog-tiles path.
    #[error("malformed tile path {path:?}: {why}")]
    BadPath { path: String, why: &'static str },
    /// The tile needs more leaves than the log has (or than any log can have).
    #[error("tile {path} needs {needs} entries; the log has {size}")]
    Beyond {
        path: String,
        needs: String,
        size: u64,
    },
    /// An entry is longer than an entry bundle's u16 length prefix can say.
    #[error("entry {index} is {len} bytes; an entry bundle holds entries of at most {MAX_ENTRY}")]
    EntryTooLarge { index: u64, len: usize },
    /// An entry bundle's bytes do not parse (a truncated length or entry).
    #[error("malformed entry bundle: {0}")]
    BadBundle(&'static str),
    /// A stored hash could not be read.
    #[error(transparent)]
    Storage(#[from] ProofError),
}

fn bad(path: &str, why: &'static str) -> TileError {
    TileError::BadPath {
        path: path.to_owned(),
        why,
    }
}

/// A decimal with no leading zero (`"0"` alone may start with one).
fn decimal(s: &str) -> Option<u64> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// `N` in 3-digit groups, all but the last prefixed with `x`.
fn encode_index(index: u64) -> String {
    let mut out = format!("{:03}", index % 1000);
    let mut n = index / 1000;
    while n > 0 {
        out = format!("x{:03}/{out}", n % 1000);
        n /= 1000;
    }
    out
}

impl Tile {
    /// Parse a path relative to the log's prefix (`tile/0/x001/234.p/7`). Only the canonical
    /// spelling is accepted: it is re-encoded and compared.
    pub fn parse(path: &str) -> Result<Self, TileError> {
        let rest = path
            .strip_prefix("tile/")
            .ok_or_else(|| bad(path, "a tile path starts with tile/"))?;
        let (level, rest) = rest
            .split_once('/')
            .ok_or_else(|| bad(path, "no tile index"))?;
        let kind = if level == "entries" {
            TileKind::Entries
        } else {
            let level = decimal(level)
                .and_then(|l| u8::try_from(l).ok())
                .filter(|l| *l <= MAX_LEVEL)
                .ok_or_else(|| bad(path, "the level is a decimal 0..=63"))?;
            TileKind::Hashes { level }
        };
        let (digits, width) = match rest.split_once(".p/") {
            Some((digits, w)) => {
                let w = decimal(w)
                    .filter(|w| (1..TILE_WIDTH).contains(w))
                    .ok_or_else(|| bad(path, "a partial width is a decimal 1..=255"))?;
                (digits, w as u16)
            }
            None => (rest, TILE_WIDTH as u16),
        };
        let mut index: u64 = 0;
        for group in digits.split('/') {
            let group = group.strip_prefix('x').unwrap_or(group);
            if group.len() != 3 || !group.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(path, "the index is 3-digit groups"));
            }
            let n: u64 = group.parse().map_err(|_| bad(path, "not digits"))?;
            index = index
                .checked_mul(1000)
                .and_then(|i| i.checked_add(n))
                .ok_or_else(|| bad(path, "the index overflows"))?;
        }
        let tile = Self { kind, index, width };
        if tile.path() != path {
            return Err(bad(path, "not the canonical spelling"));
        }
        Ok(tile)
    }

    /// The path relative to the log's prefix.
    pub fn path(&self) -> String {
        let level = match self.kind {
            TileKind::Hashes { level } => level.to_string(),
            TileKind::Entries => "entries".to_owned(),
        };
        let partial = if self.is_full() {
            String::new()
        } else {
            format!(".p/{}", self.width)
        };
        format!("tile/{level}/{}{partial}", encode_index(self.index))
    }

    /// Whether the tile holds 256 hashes (or entries).
    pub fn is_full(&self) -> bool {
        u64::from(self.width) == TILE_WIDTH
    }

    /// The tile level (0 for an entry bundle).
    fn level(&self) -> u8 {
        match self.kind {
            TileKind::Hashes { level } => level,
            TileKind::Entries => 0,
        }
    }

    /// How many leaves the tree must have for this tile to exist: `(N·256 + W)·256^L`. `None`
    /// when no u64-sized tree has them.
    pub fn needs(&self) -> Option<u64> {
        let per_hash = 1u64.checked_shl(TILE_HEIGHT * u32::from(self.level()))?;
        self.index
            .checked_mul(TILE_WIDTH)?
            .checked_add(u64::from(self.width))?
            .checked_mul(per_hash)
    }

    /// Refuse a tile the tree of `size` leaves cannot hold.
    pub fn check_within(&self, size: u64) -> Result<(), TileError> {
        match self.needs() {
            Some(needs) if needs <= size => Ok(()),
            needs => Err(TileError::Beyond {
                path: self.path(),
                needs: needs.map_or_else(|| "more than 2^64".to_owned(), |n| n.to_string()),
                size,
            }),
        }
    }

    /// The first entry (0-based leaf index) of an entry bundle, and how many it holds.
    pub fn entries(&self) -> (u64, u16) {
        (self.index.saturating_mul(TILE_WIDTH), self.width)
    }
}

/// Every tile of a tree of `size` leaves, each level's full tiles then its partial one: what a
/// client that reads the whole tree fetches.
pub fn tiles_for_size(size: u64) -> Vec<Tile> {
    let mut out = Vec::new();
    for level in 0..=7u8 {
        let per_hash = 1u64 << (TILE_HEIGHT * u32::from(level));
        let hashes = size / per_hash;
        if hashes == 0 {
            break;
        }
        for index in 0..hashes / TILE_WIDTH {
            out.push(Tile {
                kind: TileKind::Hashes { level },
                index,
                width: TILE_WIDTH as u16,
            });
        }
        let partial = hashes % TILE_WIDTH;
        if partial > 0 {
            out.push(Tile {
                kind: TileKind::Hashes { level },
                index: hashes / TILE_WIDTH,
                width: partial as u16,
            });
        }
    }
    out
}

/// The bytes of a hash tile: its hashes concatenated, read from the tree's complete subtrees.
fn hash_tile<S: Subtrees + ?Sized>(tree: &S, tile: &Tile) -> Result<Vec<u8>, TileError> {
    let TileKind::Hashes { level } = tile.kind else {
        return Err(bad(&tile.path(), "an entry bundle is not a hash tile"));
    };
    tile.check_within(tree.leaves())?;
    let height = TILE_HEIGHT * u32::from(level);
    let first = tile.index.saturating_mul(TILE_WIDTH);
    let mut out = Vec::with_capacity(usize::from(tile.width) * 32);
    for i in 0..u64::from(tile.width) {
        out.extend_from_slice(&tree.complete(height, first + i)?);
    }
    Ok(out)
}

impl StoredTree {
    /// A hash tile of this tree (tlog-tiles `tile/<L>/<N>[.p/<W>]`).
    pub fn tile(&self, tile: &Tile) -> Result<Vec<u8>, TileError> {
        hash_tile(self, tile)
    }
}

impl MerkleTree {
    /// A hash tile of this tree (tlog-tiles `tile/<L>/<N>[.p/<W>]`).
    pub fn tile(&self, tile: &Tile) -> Result<Vec<u8>, TileError> {
        hash_tile(self, tile)
    }
}

/// An entry bundle: each entry as a big-endian u16 length and its bytes. `first` is the first
/// entry's index, for the error naming an entry too long to hold.
pub fn entry_bundle<'a>(
    first: u64,
    entries: impl IntoIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, TileError> {
    let mut out = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let len = u16::try_from(entry.len()).map_err(|_| TileError::EntryTooLarge {
            index: first + i as u64,
            len: entry.len(),
        })?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(entry);
    }
    Ok(out)
}

/// The entries of an entry bundle.
pub fn parse_entry_bundle(mut bytes: &[u8]) -> Result<Vec<&[u8]>, TileError> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes
            .split_first_chunk::<2>()
            .ok_or(TileError::BadBundle("a truncated length"))?;
        let len = usize::from(u16::from_be_bytes(*len));
        let (entry, rest) = rest
            .split_at_checked(len)
            .ok_or(TileError::BadBundle("a truncated entry"))?;
        out.push(entry);
        bytes = rest;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merkle::leaf_hash;

    fn tree(n: u64) -> (MerkleTree, Vec<Vec<u8>>) {
        let lines: Vec<Vec<u8>> = (0..n).map(|i| format!("line {i}").into_bytes()).collect();
        (
            MerkleTree::from_lines(lines.iter().map(Vec::as_slice)),
            lines,
        )
    }

    #[test]
    fn paths_are_the_specs_examples_and_only_canonical_ones_parse() {
        let t = Tile {
            kind: TileKind::Hashes { level: 0 },
            index: 1_234_067,
            width: 256,
        };
        assert_eq!(t.path(), "tile/0/x001/x234/067");
        assert_eq!(Tile::parse("tile/0/x001/x234/067"), Ok(t));
        let p = Tile::parse("tile/entries/x001/234.p/7").unwrap();
        assert_eq!((p.kind, p.index, p.width), (TileKind::Entries, 1234, 7));
        assert_eq!(Tile::parse("tile/63/000").map(|t| t.level()), Ok(63));
        for bad in [
            "tile/0/1",         // not 3 digits
            "tile/0/x000/001",  // a leading zero group
            "tile/0/001/002",   // a non-final group without x
            "tile/00/000",      // a leading zero level
            "tile/64/000",      // beyond level 63
            "tile/0/000.p/256", // a partial of full width
            "tile/0/000.p/0",   // an empty partial
            "tile/0/000.p/07",  // a leading zero width
            "tile/8/0/000",     // Go sumdb's height component
            "tile/data/000",    // Go sumdb's data tiles
            "tiles/0/000",      // another prefix
            "tile/0/x1000/000", // a 4-digit group
        ] {
            assert!(Tile::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_specs_size_70000_example() {
        let tiles = tiles_for_size(70_000);
        let count = |level: u8, full: bool| {
            tiles
                .iter()
                .filter(|t| t.kind == TileKind::Hashes { level } && t.is_full() == full)
                .count()
        };
        assert_eq!((count(0, true), count(0, false)), (273, 1));
        assert_eq!((count(1, true), count(1, false)), (1, 1));
        assert_eq!((count(2, true), count(2, false)), (0, 1));
        let widths: Vec<u16> = tiles
            .iter()
            .filter(|t| !t.is_full())
            .map(|t| t.width)
            .collect();
        assert_eq!(widths, [112, 17, 1]);
        // Size 256: one full level-0 tile and a level-1 tile of width 1.
        let w: Vec<_> = tiles_for_size(256)
            .iter()
            .map(|t| (t.level(), t.width))
            .collect();
        assert_eq!(w, [(0, 256), (1, 1)]);
    }

    #[test]
    fn tile_hashes_are_the_subtree_hashes_the_spec_defines() {
        let (t, lines) = tree(600);
        // Level 0: leaf hashes.
        let tile = t.tile(&Tile::parse("tile/0/001").unwrap()).unwrap();
        assert_eq!(tile.len(), 256 * 32);
        assert_eq!(tile[..32], leaf_hash(&lines[256]));
        // Level 1, hash i: MTH of leaves i·256 .. (i+1)·256.
        let one = t.tile(&Tile::parse("tile/1/000.p/2").unwrap()).unwrap();
        let second = MerkleTree::from_lines(lines[256..512].iter().map(Vec::as_slice));
        assert_eq!(one[32..], second.root(256).unwrap());
        // A partial level-0 tile of the last 88 leaves; the 89th does not exist yet.
        assert!(t.tile(&Tile::parse("tile/0/002.p/88").unwrap()).is_ok());
        assert!(matches!(
            t.tile(&Tile::parse("tile/0/002.p/89").unwrap()),
            Err(TileError::Beyond { .. })
        ));
        assert!(t.tile(&Tile::parse("tile/1/000.p/3").unwrap()).is_err());
        assert!(t.tile(&Tile::parse("tile/7/x999/999").unwrap()).is_err());
        assert!(Tile::parse("tile/63/000").unwrap().needs().is_none());
    }

    #[test]
    fn entry_bundles_round_trip_and_refuse_long_entries() {
        let entries: [&[u8]; 3] = [b"a", b"", b"line three"];
        let bundle = entry_bundle(0, entries).unwrap();
        assert_eq!(&bundle[..3], b"\x00\x01a");
        assert_eq!(parse_entry_bundle(&bundle).unwrap(), entries);
        assert!(parse_entry_bundle(&bundle[..bundle.len() - 1]).is_err());
        assert!(parse_entry_bundle(b"\x00").is_err());
        let long = vec![b'x'; MAX_ENTRY + 1];
        assert_eq!(
            entry_bundle(512, [&b"ok"[..], long.as_slice()]),
            Err(TileError::EntryTooLarge {
                index: 513,
                len: MAX_ENTRY + 1
            })
        );
    }

    proptest::proptest! {
        /// Every tile's path parses back to it, and no string panics the parser.
        #[test]
        fn paths_round_trip_and_any_text_is_answered(
            level in 0u8..=64, index in proptest::prelude::any::<u64>(), width in 1u16..=256,
            entries in proptest::prelude::any::<bool>(), text in ".{0,40}",
        ) {
            let kind = if entries { TileKind::Entries } else { TileKind::Hashes { level } };
            let tile = Tile { kind, index, width };
            if level <= MAX_LEVEL || entries {
                proptest::prop_assert_eq!(Tile::parse(&tile.path()), Ok(tile));
            }
            let _ = Tile::parse(&text);
            let _ = Tile::parse(&format!("tile/{text}"));
        }
    }
}
