//! Recovering a program's structure from its machine code: the instructions (decoded from each
//! function start), the functions (symbols, the entry point and every call target), and the
//! block leaders (branch targets, return points, and addresses the program takes of its own
//! code — jump tables in data, addresses built with `lui`/`auipc` + `addi`).

use std::collections::{BTreeMap, BTreeSet};

use super::decode::{decode, AluOp, Inst, Op};
use super::elf::ElfImage;
use super::translate::float;
use super::RiscvError;

/// The most instructions a program may have (a guard against translating data as code).
pub const MAX_INSTRUCTIONS: usize = 4_000_000;

/// A function: a run of instructions from one start to the next.
#[derive(Clone, Debug)]
pub struct Function {
    /// Its first address.
    pub start: u64,
    /// The address after its last instruction.
    pub end: u64,
    /// Its name (from the symbol table, or `fn_<address>`).
    pub name: String,
    /// Its instructions in address order.
    pub insts: Vec<Inst>,
}

/// A program ready to translate.
#[derive(Clone, Debug)]
pub struct Program {
    /// Its functions by address, not overlapping.
    pub functions: Vec<Function>,
    /// Every address a jump may reach other than by falling through.
    pub leaders: BTreeSet<u64>,
}

impl Program {
    /// Decodes and partitions the code of `image`.
    pub fn recover(image: &ElfImage) -> Result<Program, RiscvError> {
        let mut starts: BTreeSet<u64> = image.functions.iter().map(|f| f.addr).collect();
        starts.insert(image.entry);
        let mut insts: BTreeMap<u64, Inst> = BTreeMap::new();
        // A sized symbol's code ends where the symbol says: the bytes after it (padding,
        // literal data) are not decoded, so they cannot contribute false call targets.
        let sized: BTreeMap<u64, u64> = image
            .functions
            .iter()
            .filter(|f| f.size > 0)
            .map(|f| (f.addr, f.addr.saturating_add(f.size)))
            .collect();
        let mut pending: Vec<u64> = starts.iter().copied().collect();
        while let Some(start) = pending.pop() {
            let mut addr = start;
            let limit = sized.get(&start).copied().unwrap_or(u64::MAX);
            while !insts.contains_key(&addr) && addr < limit {
                // Stop at the next known start: it is decoded from there.
                if addr != start && starts.contains(&addr) {
                    break;
                }
                // The second half of a decoded 4-byte instruction is no instruction.
                if insts.get(&addr.wrapping_sub(2)).is_some_and(|i| i.len == 4) {
                    break;
                }
                let Some(inst) = image.code_at(addr).and_then(|code| decode(addr, code)) else {
                    break;
                };
                insts.insert(addr, inst);
                if insts.len() > MAX_INSTRUCTIONS {
                    return Err(RiscvError::TooLarge(MAX_INSTRUCTIONS));
                }
                // A call's target starts a function.
                if let Op::Jal { rd, offset } = inst.op {
                    let target = addr.wrapping_add(offset as u64);
                    if rd != 0 && image.code_at(target).is_some() && starts.insert(target) {
                        pending.push(target);
                    }
                }
                addr += inst.len as u64;
            }
        }
        // A start that is no instruction's address (a call target decoded from data) starts
        // nothing.
        starts.retain(|a| insts.contains_key(a));
        let mut leaders: BTreeSet<u64> = starts.clone();
        let mut built: BTreeMap<u8, u64> = BTreeMap::new();
        // Addresses built in registers, which may be jump tables of 32-bit offsets from
        // themselves (GCC's switch tables on RISC-V).
        let mut tables: BTreeSet<u64> = BTreeSet::new();
        // Code addresses each instruction names (the calls graph's edges), and those data
        // holds (roots: any of them may be called).
        let mut refs: Vec<(u64, u64)> = Vec::new();
        let mut roots: Vec<u64> = vec![image.entry];
        for inst in insts.values() {
            let next = inst.addr + inst.len as u64;
            match inst.op {
                Op::Branch { offset, .. } | Op::Jal { offset, .. } => {
                    let target = inst.addr.wrapping_add(offset as u64);
                    leaders.insert(target);
                    refs.push((inst.addr, target));
                }
                _ => {}
            }
            if matches!(inst.op, Op::Jal { rd, .. } | Op::Jalr { rd, .. } if rd != 0) {
                leaders.insert(next);
            }
            // Code addresses built in registers: lui/auipc followed by addi.
            match inst.op {
                Op::Lui { rd, imm } => {
                    built.insert(rd, imm as u64);
                }
                Op::Auipc { rd, imm } => {
                    built.insert(rd, inst.addr.wrapping_add(imm as u64));
                }
                Op::AluImm {
                    op: AluOp::Add,
                    word: false,
                    rd,
                    rs1,
                    imm,
                } if built.contains_key(&rs1) => {
                    let value = built[&rs1].wrapping_add(imm as u64);
                    leaders.insert(value);
                    refs.push((inst.addr, value));
                    tables.insert(value);
                    built.remove(&rd);
                }
                _ => {
                    if let Some(rd) = written(&inst.op) {
                        built.remove(&rd);
                    }
                }
            }
        }
        // Code addresses stored in data: jump tables and function pointers (4- and 8-byte).
        for seg in &image.segments {
            let base = seg.vaddr;
            for (i, w) in seg.data.chunks_exact(4).enumerate() {
                let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64;
                if insts.contains_key(&v) {
                    leaders.insert(v);
                    roots.push(v);
                }
                if i % 2 == 0 && base % 8 == 0 {
                    if let Some(hi) = seg.data.get(i * 4 + 4..i * 4 + 8) {
                        let v = v | (u32::from_le_bytes([hi[0], hi[1], hi[2], hi[3]]) as u64) << 32;
                        if insts.contains_key(&v) {
                            leaders.insert(v);
                            roots.push(v);
                        }
                    }
                }
            }
        }
        for base in tables {
            let mut at = base;
            while let Some(w) = image.data_at(at, 4) {
                let offset = i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as i64;
                let target = base.wrapping_add(offset as u64);
                if !insts.contains_key(&target) || at - base >= 4 * 4096 {
                    break;
                }
                leaders.insert(target);
                at += 4;
            }
        }
        leaders.retain(|a| insts.contains_key(a));

        let names: BTreeMap<u64, &str> = image
            .functions
            .iter()
            .map(|f| (f.addr, f.name.as_str()))
            .collect();
        let mut functions = Vec::new();
        let start_list: Vec<u64> = starts.iter().copied().collect();
        for (k, &start) in start_list.iter().enumerate() {
            let limit = start_list.get(k + 1).copied().unwrap_or(u64::MAX);
            let body: Vec<Inst> = insts
                .range(start..limit)
                .map(|(_, i)| *i)
                .scan(start, |expect, i| {
                    // A run of consecutive instructions only: a gap ends the function.
                    (i.addr == *expect).then(|| {
                        *expect += i.len as u64;
                        i
                    })
                })
                .collect();
            let Some(last) = body.last() else { continue };
            functions.push(Function {
                start,
                end: last.addr + last.len as u64,
                name: names
                    .get(&start)
                    .filter(|n| !n.is_empty())
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| format!("fn_{start:x}")),
                insts: body,
            });
        }
        let functions = reachable(functions, &refs, &roots);
        Ok(Program { functions, leaders })
    }
}

/// The functions control can reach from `roots` through the code addresses functions name
/// (`refs`: from an instruction's address to a target): the rest is never translated.
fn reachable(functions: Vec<Function>, refs: &[(u64, u64)], roots: &[u64]) -> Vec<Function> {
    let holder = |addr: u64| -> Option<usize> {
        let k = functions
            .partition_point(|f| f.start <= addr)
            .checked_sub(1)?;
        (addr < functions[k].end).then_some(k)
    };
    let mut edges: Vec<Vec<usize>> = vec![Vec::new(); functions.len()];
    for &(from, to) in refs {
        if let (Some(a), Some(b)) = (holder(from), holder(to)) {
            if a != b {
                edges[a].push(b);
            }
        }
    }
    let mut live = vec![false; functions.len()];
    let mut work: Vec<usize> = roots.iter().filter_map(|&r| holder(r)).collect();
    while let Some(k) = work.pop() {
        if !std::mem::replace(&mut live[k], true) {
            work.extend(edges[k].iter().copied().filter(|&j| !live[j]));
        }
    }
    functions
        .into_iter()
        .zip(live)
        .filter_map(|(f, keep)| keep.then_some(f))
        .collect()
}

/// The register an operation writes (x0 included when named: callers filter it), numbered as
/// the translator numbers them (floating-point registers from 32).
pub fn written(op: &Op) -> Option<u8> {
    match *op {
        Op::FloatLoad { rd, .. } => Some(32 + rd),
        Op::Float { mnemonic, bits } => float::operands(mnemonic, bits).0,
        Op::Lui { rd, .. }
        | Op::Auipc { rd, .. }
        | Op::Jal { rd, .. }
        | Op::Jalr { rd, .. }
        | Op::Load { rd, .. }
        | Op::AluImm { rd, .. }
        | Op::Alu { rd, .. }
        | Op::Csr { rd, .. }
        | Op::LoadReserved { rd, .. }
        | Op::StoreConditional { rd, .. }
        | Op::Amo { rd, .. } => Some(rd),
        Op::Ecall => Some(10),
        _ => None,
    }
}

/// The registers an operation reads (numbered as in [`written`]).
pub fn read(op: &Op) -> Vec<u8> {
    match *op {
        Op::FloatLoad { rs1, .. } => vec![rs1],
        Op::FloatStore { rs1, rs2, .. } => vec![rs1, 32 + rs2],
        Op::Float { mnemonic, bits } => float::operands(mnemonic, bits).1,
        Op::Jalr { rs1, .. } | Op::Load { rs1, .. } | Op::AluImm { rs1, .. } => vec![rs1],
        Op::LoadReserved { rs1, .. } => vec![rs1],
        Op::Branch { rs1, rs2, .. }
        | Op::Store { rs1, rs2, .. }
        | Op::Alu { rs1, rs2, .. }
        | Op::StoreConditional { rs1, rs2, .. }
        | Op::Amo { rs1, rs2, .. } => vec![rs1, rs2],
        Op::Csr { src, imm, .. } if !imm => vec![src],
        Op::Ecall => vec![10, 11, 12, 13, 14, 15, 17],
        _ => Vec::new(),
    }
}
