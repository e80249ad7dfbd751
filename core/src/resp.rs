//! A reader of RESP2 replies as `RM_Call` hands them over (`RM_CallReplyProto`): the module reads
//! the replies of its hottest calls (`XPENDING`) straight from the bytes, without building a reply
//! object per element. Pure.

/// One element of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item<'a> {
    /// An array of this many elements (`-1`: nil).
    Array(i64),
    /// A bulk string (`None`: nil).
    Bulk(Option<&'a [u8]>),
    /// An integer.
    Int(i64),
    /// A simple string.
    Simple(&'a [u8]),
    /// An error (its text).
    Error(&'a [u8]),
}

/// Reads the elements of a RESP2 reply one after another, depth first.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// The line at the reader's position (without its CRLF), and moves past it.
    fn line(&mut self) -> Option<&'a [u8]> {
        let rest = self.buf.get(self.pos..)?;
        let end = rest.windows(2).position(|w| w == b"\r\n")?;
        self.pos += end + 2;
        Some(&rest[..end])
    }

    /// The next element, `None` at the end or on bytes that are not RESP2.
    pub fn next_item(&mut self) -> Option<Item<'a>> {
        let line = self.line()?;
        let (&kind, rest) = line.split_first()?;
        let int = || crate::text::parse_i64(rest);
        match kind {
            b'*' => Some(Item::Array(int()?)),
            b':' => Some(Item::Int(int()?)),
            b'+' => Some(Item::Simple(rest)),
            b'-' => Some(Item::Error(rest)),
            b'$' => {
                let n = int()?;
                if n < 0 {
                    return Some(Item::Bulk(None));
                }
                let n = n as usize;
                let data = self.buf.get(self.pos..self.pos.checked_add(n)?)?;
                if self.buf.get(self.pos + n..self.pos + n + 2) != Some(b"\r\n") {
                    return None;
                }
                self.pos += n + 2;
                Some(Item::Bulk(Some(data)))
            }
            _ => None,
        }
    }

    /// The next element if it is a bulk string (not nil).
    pub fn bulk(&mut self) -> Option<&'a [u8]> {
        match self.next_item()? {
            Item::Bulk(Some(b)) => Some(b),
            _ => None,
        }
    }

    /// The next element if it is an integer.
    pub fn int(&mut self) -> Option<i64> {
        match self.next_item()? {
            Item::Int(i) => Some(i),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_kind_of_element_and_refuses_broken_bytes() {
        let b = b"*3\r\n$4\r\na\r\nb\r\n:-12\r\n*-1\r\n$-1\r\n+OK\r\n-NOGROUP x\r\n";
        let mut r = Reader::new(b);
        assert_eq!(r.next_item(), Some(Item::Array(3)));
        assert_eq!(r.bulk(), Some(&b"a\r\nb"[..]));
        assert_eq!(r.int(), Some(-12));
        assert_eq!(r.next_item(), Some(Item::Array(-1)));
        assert_eq!(r.next_item(), Some(Item::Bulk(None)));
        assert_eq!(r.next_item(), Some(Item::Simple(b"OK")));
        assert_eq!(r.next_item(), Some(Item::Error(b"NOGROUP x")));
        assert_eq!(r.next_item(), None);
        assert_eq!(Reader::new(b"$5\r\nab\r\n").next_item(), None);
        assert_eq!(Reader::new(b"?1\r\n").next_item(), None);
        assert_eq!(Reader::new(b":12").next_item(), None);
    }

    /// One element as RESP2 writes it.
    fn write(out: &mut Vec<u8>, item: &Item) {
        let mut line = |kind: &[u8], body: &[u8]| {
            out.extend_from_slice(kind);
            out.extend_from_slice(body);
            out.extend_from_slice(b"\r\n");
        };
        match item {
            Item::Array(n) => line(b"*", n.to_string().as_bytes()),
            Item::Int(n) => line(b":", n.to_string().as_bytes()),
            Item::Simple(s) => line(b"+", s),
            Item::Error(s) => line(b"-", s),
            Item::Bulk(None) => line(b"$", b"-1"),
            Item::Bulk(Some(b)) => {
                line(b"$", b.len().to_string().as_bytes());
                line(b"", b);
            }
        }
    }

    /// Elements of any kind; simple strings and errors without CR or LF (RESP2 has none).
    fn items() -> impl proptest::strategy::Strategy<Value = Vec<(u8, i64, Vec<u8>)>> {
        use proptest::prelude::*;
        proptest::collection::vec(
            (
                0u8..6,
                any::<i64>(),
                proptest::collection::vec(any::<u8>(), 0..12),
            ),
            0..12,
        )
    }

    proptest::proptest! {
        /// What RESP2 writes reads back element by element, bulk strings binary-safe.
        #[test]
        fn reads_back_what_resp2_writes(raw in items()) {
            let line_safe: Vec<Vec<u8>> = raw.iter().map(|(_, _, b)| b.iter().copied().filter(|c| !matches!(c, b'\r' | b'\n')).collect()).collect();
            let want: Vec<Item> = raw
                .iter()
                .zip(&line_safe)
                .map(|((kind, n, b), safe)| match kind {
                    0 => Item::Array(*n),
                    1 => Item::Int(*n),
                    2 => Item::Simple(safe.as_slice()),
                    3 => Item::Error(safe.as_slice()),
                    4 => Item::Bulk(None),
                    _ => Item::Bulk(Some(b.as_slice())),
                })
                .collect();
            let mut buf = Vec::new();
            for i in &want {
                write(&mut buf, i);
            }
            let mut r = Reader::new(&buf);
            for i in &want {
                proptest::prop_assert_eq!(r.next_item(), Some(*i));
            }
            proptest::prop_assert_eq!(r.next_item(), None);
        }

        /// Any bytes: no panic, and every element read lies within the input.
        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut r = Reader::new(&b);
            let mut n = 0;
            while r.next_item().is_some() {
                n += 1;
                proptest::prop_assert!(n <= b.len());
            }
        }
    }
}
