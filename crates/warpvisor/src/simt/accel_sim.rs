//! Accel-Sim traces of a traced fleet (`warpvisor simt accel-sim`): `kernelslist.g` and
//! `kernel-1.traceg` in the format of Accel-Sim's trace-driven front end (tracer version 3),
//! so that the fleet can be simulated cycle by cycle on any GPU configuration.
//!
//! The fleet is one kernel of one warp per thread block (warp `w` holds jobs `32w..32w+31`,
//! as the GPU backends place VMs). Each warp's instructions are the blocks its replay issues
//! ([`super::replay::issued_blocks`]), one line per WebAssembly operator ([`super::sass`]),
//! with the lanes that ran it as the active mask and, for memory operators, one address per
//! active lane: the byte's place in the fleet's memory buffer at the chosen interleave, in
//! global memory (`LDG`/`STG`), or in local memory (`LDL`/`STL`) when every lane touches the
//! shadow stack. Every warp ends with `EXIT`. Hypercalls, which relaunch the kernel on a
//! GPU, do not split the trace.

use std::io::Write;
use std::path::Path;

use super::replay::issued_blocks;
use super::sass::SassInstr;
use super::trace::{Region, Trace};
use super::SimtError;
use crate::layout::InterleavedLayout;

/// Where global memory starts in the traces' addresses.
pub const GLOBAL_BASE: u64 = 0x7f00_0000_0000;
/// Where local memory starts.
pub const LOCAL_BASE: u64 = 0x7e00_0000_0000;
/// Lanes per warp.
const WARP: usize = 32;

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AccelSimSummary {
    /// Warps (thread blocks).
    pub warps: usize,
    /// Instruction lines, `EXIT`s included.
    pub lines: u64,
    /// Instructions the warps issued (the replay's count; lines less one `EXIT` per warp).
    pub issued: u64,
    /// Instructions the lanes executed (the active lanes of every line but the `EXIT`s).
    pub executed: u64,
}

/// Writes `trace`'s warps as Accel-Sim traces in `dir` (created), memory laid out with
/// `interleave` (0, 4 or 8).
pub fn write(trace: &Trace, dir: &Path, interleave: u32) -> Result<AccelSimSummary, SimtError> {
    if ![0, 4, 8].contains(&interleave) {
        return Err(SimtError::Limit(format!(
            "interleave {interleave}: 0, 4 or 8"
        )));
    }
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("kernelslist.g"), "kernel-1.traceg\n")?;
    let layout = InterleavedLayout {
        num_vms: trace.header.vms.max(1),
        interleave,
        max_pages: trace.header.max_pages.max(1),
        stack_words: 1,
        num_globals: 1,
        guard_regions: false,
    };
    // The PC of each block's first instruction (16 bytes per instruction, as SASS).
    let blocks = &trace.header.blocks;
    let mut pc_base = Vec::with_capacity(blocks.ids.len());
    let mut pc = 0u64;
    let mut nregs = 1u8;
    for id in 0..blocks.ids.len() as u32 {
        pc_base.push(pc);
        if let Some(b) = blocks.block(id) {
            pc += b.code.len() as u64;
            for i in &b.code {
                nregs = i.dst.iter().chain(&i.src).fold(nregs, |m, &r| m.max(r));
            }
        }
    }
    let exit_pc = pc;
    let jobs: Vec<usize> = (0..trace.jobs.len()).collect();
    let warps: Vec<&[usize]> = jobs.chunks(WARP).collect();
    let file = std::fs::File::create(dir.join("kernel-1.traceg"))?;
    let mut out = std::io::BufWriter::new(file);
    writeln!(
        out,
        "-kernel name = warpvisor_{}",
        sanitize(&trace.header.entry)
    )?;
    writeln!(out, "-kernel id = 1")?;
    writeln!(out, "-grid dim = ({},1,1)", warps.len())?;
    writeln!(out, "-block dim = ({WARP},1,1)")?;
    writeln!(out, "-shmem = 0")?;
    writeln!(out, "-nregs = {}", u32::from(nregs) + 1)?;
    writeln!(out, "-binary version = 70")?;
    writeln!(out, "-cuda stream id = 0")?;
    writeln!(out, "-shmem base_addr = 0x{:016x}", GLOBAL_BASE - (1 << 40))?;
    writeln!(out, "-local mem base_addr = 0x{LOCAL_BASE:016x}")?;
    writeln!(out, "-nvbit version = 1.5.5")?;
    writeln!(out, "-accelsim tracer version = 3")?;
    writeln!(out)?;
    writeln!(
        out,
        "#traces format = PC mask dest_num [reg_dests] opcode src_num [reg_srcs] mem_width \
         [adrrescompress?] [mem_addresses]"
    )?;
    writeln!(out)?;
    let mut summary = AccelSimSummary::default();
    for (w, lanes) in warps.iter().enumerate() {
        let (issued, counts) = issued_blocks(trace, lanes)?;
        let lines: u64 = issued
            .iter()
            .map(|b| blocks.block(b.id).map_or(0, |bb| bb.code.len() as u64))
            .sum::<u64>()
            + 1;
        writeln!(
            out,
            "#BEGIN_TB\n\nthread block = {w},0,0\n\nwarp = 0\ninsts = {lines}"
        )?;
        let mut line = String::new();
        for b in &issued {
            let Some(block) = blocks.block(b.id) else {
                continue;
            };
            let mut mem = b.addresses.iter();
            for (k, instr) in block.code.iter().enumerate() {
                let pc = (pc_base[b.id as usize] + k as u64) * 16;
                line.clear();
                let addresses = if instr.is_memory() { mem.next() } else { None };
                write_line(&mut line, pc, b.mask, instr, addresses, trace, &layout);
                out.write_all(line.as_bytes())?;
                summary.executed += u64::from(line_mask(b.mask, addresses).count_ones());
            }
        }
        let full = if lanes.len() >= 64 {
            u64::MAX
        } else {
            (1u64 << lanes.len()) - 1
        };
        writeln!(out, "{:04x} {:08x} 0 EXIT 0 0", exit_pc * 16, full)?;
        writeln!(out, "\n#END_TB\n")?;
        summary.warps += 1;
        summary.lines += lines;
        summary.issued += counts.lockstep;
    }
    out.flush()?;
    Ok(summary)
}

/// The lanes of a line: the block's, less those that trapped before a memory access.
fn line_mask(mask: u64, addresses: Option<&Vec<Option<(u32, u32)>>>) -> u64 {
    let Some(list) = addresses else {
        return mask;
    };
    let mut out = 0u64;
    let mut bits = mask;
    for a in list {
        let lane = bits.trailing_zeros();
        bits &= bits.wrapping_sub(1);
        if a.is_some() {
            out |= 1 << lane;
        }
    }
    out
}

fn write_line(
    line: &mut String,
    pc: u64,
    mask: u64,
    instr: &SassInstr,
    addresses: Option<&Vec<Option<(u32, u32)>>>,
    trace: &Trace,
    layout: &InterleavedLayout,
) {
    use std::fmt::Write as _;
    let mask = line_mask(mask, addresses);
    let _ = write!(line, "{pc:04x} {mask:08x} {}", instr.dst.len());
    for r in &instr.dst {
        let _ = write!(line, " R{r}");
    }
    let list: Vec<(u32, u32)> = addresses
        .map(|l| l.iter().flatten().copied().collect())
        .unwrap_or_default();
    let local = !list.is_empty()
        && list
            .iter()
            .all(|&(_, a)| trace.header.regions.region(a) == Region::Stack);
    let (opcode, width) = sass_memory(&instr.opcode, local);
    let _ = write!(line, " {opcode} {}", instr.src.len());
    for r in &instr.src {
        let _ = write!(line, " R{r}");
    }
    if width == 0 || list.is_empty() {
        line.push_str(" 0\n");
        return;
    }
    let base = if local { LOCAL_BASE } else { GLOBAL_BASE };
    let _ = write!(line, " {width} 0");
    for (vm, a) in list {
        let _ = write!(
            line,
            " 0x{:016x}",
            base + layout.cell_addr(vm, a as u64) as u64
        );
    }
    line.push('\n');
}

/// The opcode for global or local memory and the access width, from `LD.U8`-style opcodes;
/// other opcodes as they are with width 0.
fn sass_memory(opcode: &str, local: bool) -> (String, u32) {
    let (kind, suffix) = match opcode.split_once('.') {
        Some((k, s)) => (k, Some(s)),
        None => (opcode, None),
    };
    if kind != "LD" && kind != "ST" {
        return (opcode.to_string(), 0);
    }
    let width = match suffix {
        Some("U8" | "S8") => 1,
        Some("U16" | "S16") => 2,
        Some("64") => 8,
        Some("128") => 16,
        _ => 4,
    };
    let head = match (kind, local) {
        ("LD", false) => "LDG.E",
        ("ST", false) => "STG.E",
        ("LD", true) => "LDL",
        _ => "STL",
    };
    let name = match suffix {
        Some(s) => format!("{head}.{s}"),
        None => head.to_string(),
    };
    (name, width)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
