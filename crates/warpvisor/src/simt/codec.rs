//! The compact form of a VM's trace records.
//!
//! A VM's words alternate between a block id and that block's access words (how many the
//! block table says: [`TraceShape`]). Each word is stored as the LEB128 varint of a zigzagged
//! difference: a block id against the previous block id plus one (straight-line code: 0), an
//! access word against the last word of the same *access slot* — the same operand of the same
//! memory operator of the same block (a loop's stride: one byte). Slots share 4,096 remembered
//! words by their index modulo 4,096; encoder and decoder run the same state machine, so the
//! form is lossless for any sequence of words, those that follow no block table included.
//! Typical traces take 1–1.5 bytes a word instead of 4. The recorder and the replay work on
//! plain words (encoding every word as the kernel hands it over cost more than the kernel);
//! the trace file holds this form.

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
    pub fn of(table: &BlockTable) -> TraceShape {
        let mut shape = TraceShape::default();
        let mut next = 0u32;
        for id in 0..table.ids.len() as u32 {
            let n = table
                .block(id)
                .map_or(0, |b| b.mem.iter().map(|m| m.words() as u32).sum());
            shape.blocks.push((n, next));
            next = next.wrapping_add(n);
        }
        shape
    }

    /// Access words and first slot of block `id` (none for an id outside the table).
    #[inline(always)]
    fn block(&self, id: u32) -> (u32, u32) {
        self.blocks.get(id as usize).copied().unwrap_or((0, 0))
    }
}

/// What encoder and decoder remember: where in a block they are and each slot's last word.
struct State<'s> {
    shape: &'s TraceShape,
    /// Access words left in the current block (0: the next word is a block id).
    left: u32,
    /// Slot of the next access word.
    slot: u32,
    prev_block: u32,
    last: Box<[u32; SLOTS]>,
}

impl State<'_> {
    fn new(shape: &TraceShape) -> State<'_> {
        State {
            shape,
            left: 0,
            slot: 0,
            prev_block: u32::MAX,
            last: Box::new([0; SLOTS]),
        }
    }

    /// The word the next one is stored relative to, given that it is `w` (the encoder knows
    /// `w` now; the decoder calls [`State::reference`] first and [`State::advance`] after).
    #[inline(always)]
    fn reference(&self) -> u32 {
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

/// The compact form of one VM's `words`, for traces of `shape`.
pub fn encode(shape: &TraceShape, words: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(words.len() + words.len() / 2);
    let mut state = State::new(shape);
    for &w in words {
        let d = w.wrapping_sub(state.reference()) as i32;
        let mut z = ((d << 1) ^ (d >> 31)) as u32;
        while z >= 0x80 {
            out.push(z as u8 | 0x80);
            z >>= 7;
        }
        out.push(z as u8);
        state.advance(w);
    }
    out
}

/// The words `bytes` holds (encoded with `shape`). Damaged bytes end the words early: an
/// unterminated or over-long varint is where they stop.
pub fn decode(shape: &TraceShape, bytes: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut state = State::new(shape);
    let mut at = 0;
    'words: while at < bytes.len() {
        let mut z = 0u32;
        let mut shift = 0;
        loop {
            let Some(&b) = bytes.get(at) else {
                break 'words;
            };
            at += 1;
            if shift == 28 && b > 0x0f {
                break 'words;
            }
            z |= u32::from(b & 0x7f) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        let d = ((z >> 1) as i32) ^ -((z & 1) as i32);
        let w = state.reference().wrapping_add(d as u32);
        state.advance(w);
        out.push(w);
    }
    out
}

/// Whether `bytes` ends where a word ends (no varint cut short).
pub fn is_whole(bytes: &[u8]) -> bool {
    bytes.last().is_none_or(|&b| b < 0x80)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(words: &[u32]) -> TraceShape {
        let mut blocks = Vec::new();
        let mut next = 0;
        for &n in words {
            blocks.push((n, next));
            next += n;
        }
        TraceShape { blocks }
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
            assert!(is_whole(&bytes));
            assert_eq!(decode(&s, &bytes), words);
        }
    }

    #[test]
    fn a_strided_loop_takes_about_a_byte_a_word() {
        // Block 1 (two accesses) run 10,000 times, each access 4 and 8 bytes further.
        let s = shape(&[0, 2]);
        let mut words = Vec::new();
        for i in 0..10_000u32 {
            words.extend([1, 65536 + 4 * i, 1_000_000 + 8 * i]);
        }
        let bytes = encode(&s, &words);
        assert!(bytes.len() <= words.len() + 8, "{} bytes", bytes.len());
    }

    #[test]
    fn damaged_bytes_end_the_words_and_never_panic() {
        let s = shape(&[1, 2]);
        assert!(decode(&s, &[0xff; 7]).is_empty());
        assert_eq!(decode(&s, &[0x02, 0x80]).len(), 1);
        assert!(!is_whole(&[0x02, 0x80]));
        for seed in 0..200u32 {
            let junk: Vec<u8> = (0..64u32)
                .map(|i| (i.wrapping_mul(seed).wrapping_add(seed * 7) >> 3) as u8)
                .collect();
            let _ = decode(&s, &junk);
        }
    }
}
