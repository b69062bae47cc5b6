//! The compact form of a VM's trace records.
//!
//! A VM's words alternate between a block id and that block's access words (how many the
//! block table says: [`TraceShape`]). Each word is stored as the LEB128 varint of a zigzagged
//! difference: a block id against the previous block id plus one (straight-line code: 0), an
//! access word against the last word of the same *access slot* — the same operand of the same
//! memory operator of the same block (a loop's stride: one byte). Slots share 4,096 remembered
//! words by their index modulo 4,096; encoder and decoder run the same state machine, so the
//! form is lossless for any sequence of words, those that follow no block table included.
//! Typical traces take 1–1.5 bytes a word instead of 4.

use std::sync::Arc;

use super::blocks::BlockTable;

/// Remembered words per VM (a power of two).
const SLOTS: usize = 4096;

/// How many access words follow each block id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TraceShape {
    /// Per global block id: its access words and the slot of its first one.
    blocks: Vec<(u32, u32)>,
}

impl TraceShape {
    /// The shape of traces of the module whose blocks are `table`.
    pub fn of(table: &BlockTable) -> Arc<TraceShape> {
        let mut shape = TraceShape::default();
        let mut next = 0u32;
        for id in 0..table.ids.len() as u32 {
            let n = table
                .block(id)
                .map_or(0, |b| b.mem.iter().map(|m| m.words() as u32).sum());
            shape.blocks.push((n, next));
            next = next.wrapping_add(n);
        }
        Arc::new(shape)
    }

    /// Access words and first slot of block `id` (none for an id outside the table).
    #[inline(always)]
    fn block(&self, id: u32) -> (u32, u32) {
        self.blocks.get(id as usize).copied().unwrap_or((0, 0))
    }
}

/// The state encoder and decoder share.
#[derive(Debug, Clone)]
struct State {
    shape: Arc<TraceShape>,
    /// Access words left in the current block (0: the next word is a block id).
    left: u32,
    /// Slot of the next access word.
    slot: u32,
    prev_block: u32,
    last: Box<[u32; SLOTS]>,
}

impl State {
    fn new(shape: Arc<TraceShape>) -> State {
        State {
            shape,
            left: 0,
            slot: 0,
            prev_block: u32::MAX,
            last: Box::new([0; SLOTS]),
        }
    }

    /// The value word `w` is stored relative to; updates the state as if `w` came next.
    #[inline(always)]
    fn reference(&mut self) -> u32 {
        if self.left == 0 {
            self.prev_block.wrapping_add(1)
        } else {
            self.last[self.slot as usize & (SLOTS - 1)]
        }
    }

    #[inline(always)]
    fn advance(&mut self, w: u32) {
        if self.left == 0 {
            self.prev_block = w;
            (self.left, self.slot) = self.shape.block(w);
        } else {
            self.last[self.slot as usize & (SLOTS - 1)] = w;
            self.slot = self.slot.wrapping_add(1);
            self.left -= 1;
        }
    }
}

/// Appends words to one VM's compact records.
#[derive(Debug, Clone)]
pub struct Encoder {
    state: State,
}

impl Encoder {
    /// An encoder for traces of `shape`.
    pub fn new(shape: Arc<TraceShape>) -> Encoder {
        Encoder {
            state: State::new(shape),
        }
    }

    /// Appends the encoding of `words` to `out`.
    pub fn encode(&mut self, words: &[u32], out: &mut Vec<u8>) {
        // The state in locals (the hot loop of tracing), written back at the end.
        let State {
            shape,
            left,
            slot,
            prev_block,
            last,
        } = &mut self.state;
        let (mut left, mut slot, mut prev) = (*left, *slot, *prev_block);
        // At most 5 bytes a word: encode into a stack buffer, then one copy.
        let mut buf = [0u8; 5 * 256];
        for chunk in words.chunks(256) {
            let mut at = 0;
            for &w in chunk {
                let reference = if left == 0 {
                    let r = prev.wrapping_add(1);
                    prev = w;
                    (left, slot) = shape.block(w);
                    r
                } else {
                    let cell = &mut last[slot as usize & (SLOTS - 1)];
                    let r = *cell;
                    *cell = w;
                    slot = slot.wrapping_add(1);
                    left -= 1;
                    r
                };
                let d = w.wrapping_sub(reference) as i32;
                let mut z = ((d << 1) ^ (d >> 31)) as u32;
                while z >= 0x80 {
                    buf[at] = z as u8 | 0x80;
                    z >>= 7;
                    at += 1;
                }
                buf[at] = z as u8;
                at += 1;
            }
            out.extend_from_slice(&buf[..at]);
        }
        (self.state.left, self.state.slot, self.state.prev_block) = (left, slot, prev);
    }
}

/// Encodes `words` in one go.
pub fn encode(shape: &Arc<TraceShape>, words: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(words.len() + words.len() / 2);
    Encoder::new(shape.clone()).encode(words, &mut out);
    out
}

/// Reads one VM's compact records back as words.
#[derive(Debug, Clone)]
pub struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
    state: State,
    next: Option<u32>,
    consumed: u64,
}

impl<'b> Cursor<'b> {
    /// A cursor at the first word of `bytes`, encoded with `shape`.
    pub fn new(bytes: &'b [u8], shape: Arc<TraceShape>) -> Cursor<'b> {
        let mut c = Cursor {
            bytes,
            at: 0,
            state: State::new(shape),
            next: None,
            consumed: 0,
        };
        c.next = c.decode();
        c
    }

    /// Decodes the word at `at` (none at the end, or where the bytes are damaged: an
    /// unterminated or over-long varint ends the records).
    #[inline(always)]
    fn decode(&mut self) -> Option<u32> {
        let mut z = 0u32;
        let mut shift = 0;
        loop {
            let b = *self.bytes.get(self.at)?;
            self.at += 1;
            if shift == 28 && b > 0x0f {
                self.at = self.bytes.len();
                return None;
            }
            z |= u32::from(b & 0x7f) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        let d = ((z >> 1) as i32) ^ -((z & 1) as i32);
        let w = self.state.reference().wrapping_add(d as u32);
        self.state.advance(w);
        Some(w)
    }

    /// The next word, without taking it.
    #[inline]
    pub fn peek(&self) -> Option<u32> {
        self.next
    }

    /// Words taken so far.
    pub fn position(&self) -> u64 {
        self.consumed
    }
}

impl Iterator for Cursor<'_> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        let w = self.next?;
        self.consumed += 1;
        self.next = self.decode();
        Some(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(words: &[u32]) -> Arc<TraceShape> {
        let mut blocks = Vec::new();
        let mut next = 0;
        for &n in words {
            blocks.push((n, next));
            next += n;
        }
        Arc::new(TraceShape { blocks })
    }

    #[test]
    fn words_come_back_as_they_went_in_whatever_they_are() {
        let s = shape(&[0, 2, 1, 3]);
        let cases: Vec<Vec<u32>> = vec![
            vec![],
            vec![0, 1, 100, 104, 1, 108, 112, 2, 7, 3, 1, 2, 3],
            // Ids outside the table, extreme values, a block cut short.
            vec![9, u32::MAX, 0, 1, u32::MAX, 0, 3, 5],
            (0..5000u32)
                .map(|i| i.wrapping_mul(2_654_435_761))
                .collect(),
        ];
        for words in cases {
            let bytes = encode(&s, &words);
            let back: Vec<u32> = Cursor::new(&bytes, s.clone()).collect();
            assert_eq!(back, words);
        }
    }

    #[test]
    fn a_strided_loop_takes_about_a_byte_a_word() {
        // Block 1 (two accesses) run 10,000 times, each access 4 bytes further.
        let s = shape(&[0, 2]);
        let mut words = Vec::new();
        for i in 0..10_000u32 {
            words.extend([1, 65536 + 4 * i, 1_000_000 + 8 * i]);
        }
        let bytes = encode(&s, &words);
        assert!(bytes.len() <= words.len() + 8, "{} bytes", bytes.len());
        // Encoding in pieces gives the same bytes as in one go.
        let mut e = Encoder::new(s.clone());
        let mut pieces = Vec::new();
        for part in words.chunks(777) {
            e.encode(part, &mut pieces);
        }
        assert_eq!(pieces, bytes);
    }

    #[test]
    fn damaged_bytes_end_the_records_and_never_panic() {
        let s = shape(&[1, 2]);
        let c: Vec<u32> = Cursor::new(&[0xff; 7], s.clone()).collect();
        assert!(c.is_empty());
        let c: Vec<u32> = Cursor::new(&[0x02, 0x80], s.clone()).collect();
        assert_eq!(c.len(), 1);
        for seed in 0..200u32 {
            let junk: Vec<u8> = (0..64u32)
                .map(|i| (i.wrapping_mul(seed).wrapping_add(seed * 7) >> 3) as u8)
                .collect();
            let _ = Cursor::new(&junk, s.clone()).count();
        }
    }
}
