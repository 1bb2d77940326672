//! A minimal, independent CBOR decoder for checking the encoder's output in tests. It rejects
//! non-minimal heads so that "decodes" also means "was canonical enough".

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    Int(i128),
    Bytes(Vec<u8>),
    Text(String),
    Array(Vec<Item>),
    Map(Vec<(Item, Item)>),
    Bool(bool),
    Null,
}

impl Item {
    pub(crate) fn get(&self, key: &Item) -> Option<&Item> {
        match self {
            Item::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(crate) fn get_text(&self, key: &str) -> Option<&Item> {
        self.get(&Item::Text(key.to_owned()))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Item::Bytes(b) => b,
            other => panic!("not bytes: {other:?}"),
        }
    }
}

/// Decodes one item and returns it with the unread rest.
pub(crate) fn decode(input: &[u8]) -> (Item, &[u8]) {
    let (&first, rest) = input.split_first().expect("empty input");
    let major = first >> 5;
    let info = first & 0x1f;
    let (arg, mut rest) = match info {
        0..=23 => (u64::from(info), rest),
        24..=27 => {
            let n = 1usize << (info - 24);
            let (b, r) = rest.split_at(n);
            let v = b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x));
            let min = match n {
                1 => 24,
                2 => 0x100,
                4 => 0x1_0000,
                _ => 0x1_0000_0000,
            };
            assert!(v >= min, "non-minimal head");
            (v, r)
        }
        _ => panic!("unsupported additional info {info}"),
    };
    let item = match major {
        0 => Item::Int(i128::from(arg)),
        1 => Item::Int(-1 - i128::from(arg)),
        2 => {
            let (b, r) = rest.split_at(arg as usize);
            rest = r;
            Item::Bytes(b.to_vec())
        }
        3 => {
            let (b, r) = rest.split_at(arg as usize);
            rest = r;
            Item::Text(String::from_utf8(b.to_vec()).unwrap())
        }
        4 => {
            let mut items = Vec::new();
            for _ in 0..arg {
                let (i, r) = decode(rest);
                items.push(i);
                rest = r;
            }
            Item::Array(items)
        }
        5 => {
            let mut entries = Vec::new();
            for _ in 0..arg {
                let (k, r) = decode(rest);
                let (v, r) = decode(r);
                entries.push((k, v));
                rest = r;
            }
            Item::Map(entries)
        }
        7 => match info {
            20 => Item::Bool(false),
            21 => Item::Bool(true),
            22 => Item::Null,
            _ => panic!("unsupported simple value"),
        },
        _ => panic!("unsupported major type {major}"),
    };
    (item, rest)
}

/// Decodes exactly one item spanning all of `input`.
pub(crate) fn decode_all(input: &[u8]) -> Item {
    let (item, rest) = decode(input);
    assert!(rest.is_empty(), "{} trailing bytes", rest.len());
    item
}
