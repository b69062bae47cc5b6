//! What a traced fleet records, and the trace file.
//!
//! A traced kernel (`KernelOptions::trace`, `cpu` with direct calls) makes each VM write, in
//! order, the global id of every basic block it enters followed by one word per memory
//! access of that block (the effective address; bulk operators their operands, see
//! [`MemOp::words`]). The words reach the host through the kernel's `wv_host.trace` when the
//! VM's buffer fills and when it leaves the kernel; [`TraceRecorder`] keeps them per VM.
//!
//! The file: `WVSIMT\0\0`, a little-endian `u32` version, a `u64` length and that many bytes
//! of JSON ([`TraceHeader`]: the module's hash, function names, the block table, source
//! lines, the fleet's shape and memory regions), then a `u64` job count and per job a
//! truncation byte, a `u64` word count, a `u64` byte count and the job's words in their
//! compact form ([`super::codec`]: varint differences, 1–1.5 bytes a word).

use std::io::{Read, Write};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::blocks::{BlockTable, MemOp};
use super::codec::{self, TraceShape};
use super::source::SourceLines;
use super::SimtError;
use crate::frontend::{ConstExpr, ExportKind, Module, SegmentMode};

/// The trace file's first bytes.
const MAGIC: &[u8; 8] = b"WVSIMT\0\0";
/// The trace file's format version.
pub const TRACE_VERSION: u32 = 2;
/// The largest header a reader accepts.
const MAX_HEADER_BYTES: u64 = 1 << 30;

/// One job's records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobTrace {
    /// Block ids and addresses, in the order the VM made them.
    pub words: Vec<u32>,
    /// The VM recorded more than the recorder kept: the analysis ends this job early.
    pub truncated: bool,
}

/// The records of a traced fleet's VMs, as the kernel hands them over.
#[derive(Debug)]
pub struct TraceRecorder {
    vms: Vec<Mutex<JobTrace>>,
    max_words: usize,
}

impl TraceRecorder {
    /// A recorder for `num_vms` VMs keeping at most `max_words` words of each.
    pub fn new(num_vms: u32, max_words: usize) -> TraceRecorder {
        TraceRecorder {
            vms: (0..num_vms)
                .map(|_| Mutex::new(JobTrace::default()))
                .collect(),
            max_words,
        }
    }

    /// Appends VM `vm`'s next words (past the limit, marks it truncated).
    pub fn record(&self, vm: u32, words: &[u32]) {
        let Some(slot) = self.vms.get(vm as usize) else {
            return;
        };
        let mut t = slot.lock().unwrap_or_else(|p| p.into_inner());
        if t.words.capacity() == 0 {
            reserve_huge(&mut t.words, self.max_words);
        }
        let room = self.max_words.saturating_sub(t.words.len());
        if words.len() > room {
            t.truncated = true;
        }
        let keep = words.len().min(room);
        t.words.extend_from_slice(&words[..keep]);
    }

    /// Every VM's records so far, leaving the recorder empty.
    pub fn take(&self) -> Vec<JobTrace> {
        self.vms
            .iter()
            .map(|m| std::mem::take(&mut *m.lock().unwrap_or_else(|p| p.into_inner())))
            .collect()
    }
}

/// Reserves room for `words` words in `v` (address space only: pages come as they are
/// written) and asks the kernel for huge pages there: a traced VM's records arrive at
/// gigabytes per second, and faulting them in 4 KiB at a time costs as much as the tracing.
fn reserve_huge(v: &mut Vec<u32>, words: usize) {
    v.reserve_exact(words);
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_mut_ptr() as usize;
        let end = start + v.capacity() * std::mem::size_of::<u32>();
        let (a, b) = (start.div_ceil(HUGE) * HUGE, end / HUGE * HUGE);
        if b > a {
            // SAFETY: [a, b) lies inside the vector's own allocation; MADV_HUGEPAGE changes
            // how its pages are backed, never their contents. Failure is harmless.
            unsafe {
                libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// Where a module keeps what in its linear memory, as far as the module says (LLVM's
/// conventions: `__stack_pointer` is the first mutable `i32` global, `__heap_base` and
/// `__data_end` exported globals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRegions {
    /// The shadow stack's initial top (it grows down).
    pub stack_top: Option<u32>,
    /// `[start, end)` of the active data segments (with `__data_end`).
    pub data: Option<(u32, u32)>,
    /// Where the heap starts.
    pub heap_base: Option<u32>,
}

/// A region of linear memory, for the memory report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Region {
    /// The shadow stack (LLVM's stack in linear memory).
    Stack,
    /// Static data.
    Data,
    /// Everything else: the heap.
    Heap,
}

impl Region {
    /// Every region, in the order of their discriminants.
    pub const ALL: [Region; 3] = [Region::Stack, Region::Data, Region::Heap];
}

impl MemoryRegions {
    /// The regions of `module`.
    pub fn of(module: &Module<'_>) -> MemoryRegions {
        let global_value = |g: u32| match module.globals.get(g as usize)?.init {
            Some(ConstExpr::I32(v)) => Some(v as u32),
            _ => None,
        };
        let exported = |name: &str| match module.export(name) {
            Some(ExportKind::Global(g)) => global_value(g),
            _ => None,
        };
        let stack_top = module
            .globals
            .iter()
            .position(|g| g.mutable && g.ty == wasmparser::ValType::I32 && g.import.is_none())
            .and_then(|g| global_value(g as u32));
        let mut data: Option<(u32, u32)> = None;
        for d in &module.datas {
            if let SegmentMode::Active {
                offset: ConstExpr::I32(at),
                ..
            } = d.mode
            {
                let (s, e) = (at as u32, (at as u32).saturating_add(d.bytes.len() as u32));
                data = Some(data.map_or((s, e), |(a, b)| (a.min(s), b.max(e))));
            }
        }
        if let (Some((s, e)), Some(end)) = (data, exported("__data_end")) {
            data = Some((s, e.max(end)));
        }
        MemoryRegions {
            stack_top,
            data,
            heap_base: exported("__heap_base"),
        }
    }

    /// The region address `addr` lies in.
    pub fn region(&self, addr: u32) -> Region {
        if let Some((s, e)) = self.data {
            if (s..e).contains(&addr) {
                return Region::Data;
            }
        }
        match (self.stack_top, self.heap_base) {
            // LLVM puts the stack below the heap, before or after the data.
            (Some(top), Some(heap)) if addr < heap.max(top) => Region::Stack,
            (Some(top), None) if addr < top => Region::Stack,
            _ => Region::Heap,
        }
    }
}

/// What a trace file says before the records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceHeader {
    /// [`TRACE_VERSION`].
    pub version: u32,
    /// SHA-256 of the module's binary, hex.
    pub module_sha256: String,
    /// Each function's name (the name section's, or `func[N]`).
    pub functions: Vec<String>,
    /// The module's basic blocks.
    pub blocks: BlockTable,
    /// VMs in the traced fleet: job `j` ran on VM `j % vms`.
    pub vms: u32,
    /// Pages reserved per VM (the stride of a contiguous layout).
    pub max_pages: u32,
    /// Linear memory's regions.
    pub regions: MemoryRegions,
    /// What ran: `_start` of a WASI program, or the invoked export.
    pub entry: String,
    /// The source lines of the blocks' instructions, when the module carries DWARF.
    #[serde(default)]
    pub source: Option<SourceLines>,
}

impl TraceHeader {
    /// The header of a trace of `module` (its binary `binary`) on a fleet of `vms` VMs.
    pub fn new(
        binary: &[u8],
        module: &Module<'_>,
        vms: u32,
        max_pages: u32,
        entry: &str,
    ) -> Result<TraceHeader, SimtError> {
        let blocks = BlockTable::of(module)?;
        Ok(TraceHeader {
            version: TRACE_VERSION,
            module_sha256: hex(&Sha256::digest(binary)),
            functions: (0..module.funcs.len() as u32)
                .map(|f| module.func_display_name(f))
                .collect(),
            source: SourceLines::of(binary, &blocks),
            blocks,
            vms,
            max_pages,
            regions: MemoryRegions::of(module),
            entry: entry.to_string(),
        })
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A whole trace: the header and every job's records.
#[derive(Debug, Clone)]
pub struct Trace {
    /// What the records mean.
    pub header: TraceHeader,
    /// One per job, in job order.
    pub jobs: Vec<JobTrace>,
}

impl Trace {
    /// Total words of every job.
    pub fn total_words(&self) -> u64 {
        self.jobs.iter().map(|j| j.words.len() as u64).sum()
    }

    /// Writes the trace file.
    pub fn write(&self, out: &mut impl Write) -> Result<(), SimtError> {
        let header = serde_json::to_vec(&self.header)
            .map_err(|e| SimtError::BadTrace(format!("header: {e}")))?;
        out.write_all(MAGIC)?;
        out.write_all(&TRACE_VERSION.to_le_bytes())?;
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        out.write_all(&(self.jobs.len() as u64).to_le_bytes())?;
        let shape = TraceShape::of(&self.header.blocks);
        // Encoded a few jobs at a time on every core, written in order.
        let workers = crate::work_queue::default_workers();
        for group in self.jobs.chunks(workers * 4) {
            let encoded = crate::work_queue::map_indexed(group.len(), workers, |j| {
                codec::encode(&shape, &group[j].words)
            });
            for (job, bytes) in group.iter().zip(encoded) {
                out.write_all(&[u8::from(job.truncated)])?;
                out.write_all(&(job.words.len() as u64).to_le_bytes())?;
                out.write_all(&(bytes.len() as u64).to_le_bytes())?;
                out.write_all(&bytes)?;
            }
        }
        Ok(())
    }

    /// Reads a trace file of `len` bytes (the bound on everything it may claim to hold).
    pub fn read(input: &mut impl Read, len: u64) -> Result<Trace, SimtError> {
        let bad = |why: &str| SimtError::BadTrace(why.to_string());
        let mut magic = [0u8; 8];
        input
            .read_exact(&mut magic)
            .map_err(|_| bad("shorter than its magic number"))?;
        if &magic != MAGIC {
            return Err(bad(
                "no WVSIMT magic number (not a `warpvisor simt trace` file)",
            ));
        }
        let version = read_u32(input)?;
        if version != TRACE_VERSION {
            return Err(SimtError::BadTrace(format!(
                "format version {version}; this warpvisor reads version {TRACE_VERSION}"
            )));
        }
        let header_len = read_u64(input)?;
        if header_len > len.min(MAX_HEADER_BYTES) {
            return Err(bad("header longer than the file"));
        }
        let mut header = vec![0u8; header_len as usize];
        input
            .read_exact(&mut header)
            .map_err(|_| bad("header cut short"))?;
        let header: TraceHeader = serde_json::from_slice(&header)
            .map_err(|e| SimtError::BadTrace(format!("header: {e}")))?;
        header
            .blocks
            .validate()
            .map_err(|e| SimtError::BadTrace(format!("block table: {e}")))?;
        if header.functions.len() != header.blocks.funcs.len() {
            return Err(bad("function names and block table disagree"));
        }
        let shape = TraceShape::of(&header.blocks);
        let jobs = read_u64(input)?;
        if jobs > len {
            return Err(bad("more jobs than the file has bytes"));
        }
        let mut left = len.saturating_sub(20 + header_len + 8);
        let mut out = Vec::with_capacity(jobs as usize);
        for j in 0..jobs {
            let mut flag = [0u8; 1];
            input
                .read_exact(&mut flag)
                .map_err(|_| SimtError::BadTrace(format!("job {j} cut short")))?;
            let n = read_u64(input)?;
            let size = read_u64(input)?;
            left = left.saturating_sub(17);
            if size > left || n > size {
                return Err(SimtError::BadTrace(format!(
                    "job {j} claims {size} bytes of {n} words, more than the file holds"
                )));
            }
            left -= size;
            let mut bytes = vec![0u8; size as usize];
            input
                .read_exact(&mut bytes)
                .map_err(|_| SimtError::BadTrace(format!("job {j} cut short")))?;
            let words = codec::decode(&shape, &bytes);
            if words.len() as u64 != n || !codec::is_whole(&bytes) {
                return Err(SimtError::BadTrace(format!(
                    "job {j} claims {n} words but its records hold {}",
                    words.len()
                )));
            }
            out.push(JobTrace {
                words,
                truncated: flag[0] != 0,
            });
        }
        Ok(Trace { header, jobs: out })
    }

    /// Reads the trace file at `path`.
    pub fn read_file(path: &std::path::Path) -> Result<Trace, SimtError> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Trace::read(&mut std::io::BufReader::new(file), len)
    }

    /// Words one job's records hold for its memory accesses, per block id — for statistics.
    pub fn mem_words(&self, id: u32) -> usize {
        self.header
            .blocks
            .block(id)
            .map_or(0, |b| b.mem.iter().map(|m: &MemOp| m.words()).sum())
    }
}

fn read_u32(input: &mut impl Read) -> Result<u32, SimtError> {
    let mut b = [0u8; 4];
    input
        .read_exact(&mut b)
        .map_err(|_| SimtError::BadTrace("cut short".into()))?;
    Ok(u32::from_le_bytes(b))
}

fn read_u64(input: &mut impl Read) -> Result<u64, SimtError> {
    let mut b = [0u8; 8];
    input
        .read_exact(&mut b)
        .map_err(|_| SimtError::BadTrace("cut short".into()))?;
    Ok(u64::from_le_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_reads_back_as_written_and_damage_is_an_error() {
        let bytes = wat::parse_str("(module (func nop))").unwrap();
        let module = crate::frontend::load(&bytes).unwrap();
        let trace = Trace {
            header: TraceHeader::new(&bytes, &module, 2, 1, "f").unwrap(),
            jobs: vec![
                JobTrace {
                    words: vec![0, 1, 2],
                    truncated: false,
                },
                JobTrace {
                    words: vec![],
                    truncated: true,
                },
            ],
        };
        let mut file = Vec::new();
        trace.write(&mut file).unwrap();
        let back = Trace::read(&mut file.as_slice(), file.len() as u64).unwrap();
        assert_eq!(back.jobs, trace.jobs);
        assert_eq!(back.header.blocks, trace.header.blocks);
        for cut in [0, 7, 12, 30, file.len() - 1] {
            let r = Trace::read(&mut &file[..cut], cut as u64);
            assert!(matches!(r, Err(SimtError::BadTrace(_))), "cut at {cut}");
        }
        // A header whose block table lies: an error, not a panic later.
        let mut crafted = trace.clone();
        if let Some(Some(fb)) = crafted.header.blocks.funcs.get_mut(0) {
            fb.ipdom.clear();
        }
        let mut bytes = Vec::new();
        crafted.write(&mut bytes).unwrap();
        let r = Trace::read(&mut bytes.as_slice(), bytes.len() as u64);
        assert!(matches!(r, Err(SimtError::BadTrace(_))));
        let mut liar = file.clone();
        let n = liar.len();
        liar[n - 8..].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Trace::read(&mut liar.as_slice(), n as u64).is_err());
        // A job whose word count disagrees with its records.
        let mut liar = file.clone();
        let at = n - 8 - 1 - 8 - 8 - 3 - 8;
        liar[at..at + 8].copy_from_slice(&2u64.to_le_bytes());
        let r = Trace::read(&mut liar.as_slice(), n as u64);
        assert!(matches!(r, Err(SimtError::BadTrace(ref w)) if w.contains("claims 2 words")));
    }

    #[test]
    fn the_recorder_keeps_at_most_its_limit_and_says_so() {
        let r = TraceRecorder::new(2, 4);
        r.record(0, &[1, 2, 3]);
        r.record(0, &[4, 5]);
        r.record(1, &[9]);
        r.record(7, &[9]);
        let t = r.take();
        assert_eq!(t[0].words, vec![1, 2, 3, 4]);
        assert!(t[0].truncated);
        assert_eq!(t[1].words, vec![9]);
        assert!(!t[1].truncated);
        assert!(r.take()[0].words.is_empty());
    }
}
