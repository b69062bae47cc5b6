//! The SIMT emulation's view of a kernel (see `simt.h`): the basic blocks the emitter cuts
//! it into, numbered as the resume points that start them, their successors, each block's
//! immediate post-dominator, where lanes that diverge at its end reconverge, and the return
//! site of each block that ends in a call. Emitted as four tables (`wvp_simt_instrs_N`,
//! `_sites_N`, `_ipdom_N`, `_calls_N`) next to the kernel.
//!
//! Subroutines (`ptx::subroutines`) are separate graphs: a call's block goes on to its
//! return site and a return goes to the exit, so a branch in a function reconverges inside it
//! or, when its post-dominator is the exit, where its reconvergence entry does (`simt.h`).

use std::collections::HashMap;
use std::fmt::Write;

use crate::analysis::post_dominators;
use crate::ptx::ast::{Instruction, Operand};
use crate::ptx::subroutines;

/// Where control goes at a block's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Successor {
    /// The block of this resume id (falling through into it).
    Block(u32),
    /// The block a label starts (resolved once every label is known).
    Label(String),
    /// The thread ends (`ret`, `exit`, `trap`).
    Exit,
}

/// One basic block.
#[derive(Debug, Default, Clone)]
pub(super) struct Block {
    /// PTX instructions in it.
    pub instrs: u32,
    /// Global memory instructions in it (their sites are numbered 0.. per block).
    pub sites: u32,
    pub successors: Vec<Successor>,
    /// For a block that ends in a call: the block its lanes return to.
    pub returns_to: Option<u32>,
}

/// The blocks of one kernel as the emitter produces them.
#[derive(Debug)]
pub(super) struct SimtPlan {
    /// By resume id: block 0 starts the kernel.
    pub blocks: Vec<Block>,
    /// The block being emitted.
    current: usize,
    /// Whether the code emitted so far falls through to what comes next.
    falls: bool,
    /// Whether the block being emitted ends in a call (the next block is its return site).
    calls: bool,
    /// The block each label starts.
    labels: HashMap<String, u32>,
    /// Where each block after the first starts in the translated body: its resume id and the
    /// byte offset of its resume label (`simt_kernel.rs` cuts the body there).
    pub block_starts: Vec<(u32, usize)>,
}

/// Instructions that end a basic block by transferring control.
pub(super) fn transfers_control(i: &Instruction) -> bool {
    matches!(i.opcode.as_str(), "bra" | "brx" | "ret" | "exit" | "trap")
}

impl SimtPlan {
    pub fn new() -> Self {
        SimtPlan {
            blocks: vec![Block::default()],
            current: 0,
            falls: true,
            calls: false,
            labels: HashMap::new(),
            block_starts: Vec::new(),
        }
    }

    /// Counts `i` in the current block and notes where it may send control.
    /// `tables` resolves `brx`'s target lists.
    pub fn instruction(&mut self, i: &Instruction, tables: &HashMap<String, Vec<String>>) {
        let block = &mut self.blocks[self.current];
        if !i.has(subroutines::ABI) {
            block.instrs += 1;
        }
        match (i.opcode.as_str(), i.operands.first(), i.operands.get(1)) {
            // A call: in its function's graph control goes on at the return site.
            ("bra", _, _) if i.has(subroutines::CALL) => {
                self.calls = true;
                self.falls = true;
                return;
            }
            ("brx", _, _) if i.has(subroutines::RET) => block.successors.push(Successor::Exit),
            ("bra", Some(Operand::Symbol(l)), _) => {
                block.successors.push(Successor::Label(l.clone()))
            }
            ("brx", _, Some(Operand::Symbol(t))) => {
                for l in tables.get(t).into_iter().flatten() {
                    block.successors.push(Successor::Label(l.clone()));
                }
            }
            ("ret" | "exit" | "trap", _, _) => block.successors.push(Successor::Exit),
            _ => {}
        }
        self.falls = !(transfers_control(i) && i.guard.is_none());
    }

    /// A label starts the block of resume point `resume`.
    pub fn label(&mut self, name: &str, resume: u32) {
        self.labels.insert(name.to_string(), resume);
    }

    /// Every label with the block it starts.
    pub fn label_ids(&self) -> Vec<(&str, u32)> {
        self.labels.iter().map(|(l, &r)| (l.as_str(), r)).collect()
    }

    /// A new block starts at resume point `resume`.
    pub fn start_block(&mut self, resume: u32) {
        if self.falls {
            self.blocks[self.current]
                .successors
                .push(Successor::Block(resume));
        }
        if self.calls {
            self.blocks[self.current].returns_to = Some(resume);
            self.calls = false;
        }
        let r = resume as usize;
        if self.blocks.len() <= r {
            self.blocks.resize(r + 1, Block::default());
        }
        self.current = r;
        self.falls = true;
    }

    /// The next global memory instruction's site in the current block.
    pub fn site(&mut self) -> u32 {
        let b = &mut self.blocks[self.current];
        b.sites += 1;
        b.sites - 1
    }

    /// Each block's successors as block indices; the exit is `blocks.len()`.
    fn successors(&self) -> Vec<Vec<usize>> {
        let exit = self.blocks.len();
        self.blocks
            .iter()
            .map(|b| {
                b.successors
                    .iter()
                    .map(|s| match s {
                        Successor::Block(r) => *r as usize,
                        Successor::Label(l) => self.labels.get(l).map_or(exit, |&r| r as usize),
                        Successor::Exit => exit,
                    })
                    .collect()
            })
            .collect()
    }

    /// Immediate post-dominators by block; `blocks.len()` (the exit) for blocks whose lanes
    /// never reconverge (every path ends, or none reaches the end).
    pub fn ipdoms(&self) -> Vec<u32> {
        let n = self.blocks.len();
        post_dominators(&self.successors(), n)
            .into_iter()
            .map(|d| d as u32)
            .collect()
    }

    /// The tables `simt.h` reads, for kernel `k`.
    pub fn tables(&self, k: usize, out: &mut String) {
        let join = |v: Vec<u32>| {
            v.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let n = self.blocks.len();
        let _ = writeln!(
            out,
            "/* SIMT emulation: per block (by resume id) its instructions, global memory \
             instructions, where its lanes reconverge ({n} = never, or where the entry they \
             run under does), and for a call the block it returns to. */"
        );
        let _ = writeln!(
            out,
            "static const uint32_t wvp_simt_instrs_{k}[{n}] = {{{}}};",
            join(self.blocks.iter().map(|b| b.instrs).collect())
        );
        let _ = writeln!(
            out,
            "static const uint32_t wvp_simt_sites_{k}[{n}] = {{{}}};",
            join(self.blocks.iter().map(|b| b.sites).collect())
        );
        let _ = writeln!(
            out,
            "static const uint32_t wvp_simt_ipdom_{k}[{n}] = {{{}}};",
            join(self.ipdoms())
        );
        let _ = writeln!(
            out,
            "static const uint32_t wvp_simt_calls_{k}[{n}] = {{{}}};",
            join(
                self.blocks
                    .iter()
                    .map(|b| b.returns_to.unwrap_or(u32::MAX))
                    .collect()
            )
        );
        let _ = writeln!(
            out,
            "WVP_EXPORT const uint32_t wvp_simt_max_sites_{k} = {};",
            self.max_sites()
        );
    }

    /// The most global memory instructions in one block.
    pub fn max_sites(&self) -> u32 {
        self.blocks.iter().map(|b| b.sites).max().unwrap_or(0)
    }
}
