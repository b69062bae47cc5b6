//! WASI preview1 (`wasi_snapshot_preview1`) served by the host, per VM: arguments and
//! environment, captured standard streams, clocks, randomness, `proc_exit`, and preopened
//! directories confined beneath their handles (`path.rs`).
//!
//! Every guest pointer, length and count is checked before the host allocates, reads or
//! writes anything (`guest.rs`); the answers to hostile arguments are wasmtime-wasi's.

pub mod continuous;
pub mod errno;
mod fd;
mod fs;
mod guest;
mod path;
mod poll;
pub mod program;
pub mod stdin;
pub mod suite;

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use errno::*;
use fs::FdTable;
use guest::GuestMemory;
pub use stdin::Stdin;

use crate::frontend::{ExportKind, Module};
use crate::vmm::{HostFunctions, HostStop, Imports, TrapKind, Value, VmMemory, VmmError};

/// The import module WASI preview1 functions come from.
pub const MODULE: &str = "wasi_snapshot_preview1";

/// The WASI functions warpvisor serves.
pub const FUNCTIONS: &[&str] = &[
    "args_get",
    "args_sizes_get",
    "environ_get",
    "environ_sizes_get",
    "clock_res_get",
    "clock_time_get",
    "fd_advise",
    "fd_allocate",
    "fd_close",
    "fd_datasync",
    "fd_fdstat_get",
    "fd_fdstat_set_flags",
    "fd_fdstat_set_rights",
    "fd_filestat_get",
    "fd_filestat_set_size",
    "fd_filestat_set_times",
    "fd_pread",
    "fd_prestat_dir_name",
    "fd_prestat_get",
    "fd_pwrite",
    "fd_read",
    "fd_readdir",
    "fd_renumber",
    "fd_seek",
    "fd_sync",
    "fd_tell",
    "fd_write",
    "path_create_directory",
    "path_filestat_get",
    "path_filestat_set_times",
    "path_link",
    "path_open",
    "path_readlink",
    "path_remove_directory",
    "path_rename",
    "path_symlink",
    "path_unlink_file",
    "poll_oneoff",
    "proc_exit",
    "proc_raise",
    "random_get",
    "sched_yield",
    "sock_accept",
    "sock_recv",
    "sock_send",
    "sock_shutdown",
];

/// What one VM runs with: its job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WasiJob {
    /// Arguments after the program name.
    pub args: Vec<String>,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Standard input (shared, not copied, by the jobs and VMs that read it).
    pub stdin: Stdin,
}

/// What one VM produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WasiOutput {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

/// The most bytes of stdout, and of stderr, kept for one job. Past it a write keeps what fits
/// and fails with `IO`, as wasmtime's memory pipes of the same capacity do.
pub const OUTPUT_LIMIT: usize = 64 << 20;

/// The largest `random_get` wasmtime serves (64 MiB); a larger request traps.
const RANDOM_LIMIT: u32 = 64 << 20;

/// The WASI state of one VM.
struct VmState {
    argv: Vec<String>,
    env: Vec<String>,
    stdin: Stdin,
    /// How far this VM has read its standard input.
    stdin_pos: u64,
    out: WasiOutput,
    max_output: usize,
    fds: FdTable,
    /// The deadlines of a `poll_oneoff` this VM is parked in.
    poll_deadlines: Option<Vec<Option<Instant>>>,
}

/// The WASI state of a whole fleet, shared between the fleet's host and its owner.
pub struct WasiState {
    program_name: String,
    /// The preopened directories, opened once and shared by every VM's descriptor table.
    preopens: Vec<(Arc<File>, String)>,
    vms: Vec<VmState>,
    started: Instant,
}

impl WasiState {
    /// A state for `num_vms` VMs of program `program_name` with directories `preopens`
    /// (`(host, guest)` pairs); fails if a directory cannot be opened.
    pub fn new(
        program_name: &str,
        preopens: Vec<(PathBuf, String)>,
        num_vms: u32,
    ) -> Result<Self, VmmError> {
        let preopens = preopens
            .into_iter()
            .map(|(host, guest)| {
                let dir = cap_primitives::fs::open_ambient_dir(
                    &host,
                    cap_primitives::ambient_authority(),
                )
                .map_err(|e| VmmError::Preopen {
                    path: host.display().to_string(),
                    reason: e.to_string(),
                })?;
                Ok((Arc::new(dir), guest))
            })
            .collect::<Result<_, VmmError>>()?;
        let mut s = WasiState {
            program_name: program_name.to_string(),
            preopens,
            vms: Vec::new(),
            started: Instant::now(),
        };
        s.set_jobs(&vec![WasiJob::default(); num_vms as usize]);
        Ok(s)
    }

    /// Gives VM i job `jobs[i]` (fresh streams and descriptors).
    pub fn set_jobs(&mut self, jobs: &[WasiJob]) {
        self.vms = jobs.iter().map(|j| self.fresh_vm(j)).collect();
    }

    /// Gives VM `vm` alone `job` (fresh streams and descriptors): a VM restarted while the
    /// others run on.
    pub fn set_job(&mut self, vm: usize, job: &WasiJob) {
        let fresh = self.fresh_vm(job);
        if let Some(v) = self.vms.get_mut(vm) {
            *v = fresh;
        }
    }

    fn fresh_vm(&self, j: &WasiJob) -> VmState {
        VmState {
            argv: std::iter::once(self.program_name.clone())
                .chain(j.args.iter().cloned())
                .collect(),
            env: j.env.iter().map(|(k, v)| format!("{k}={v}")).collect(),
            stdin: j.stdin.clone(),
            stdin_pos: 0,
            out: WasiOutput::default(),
            max_output: OUTPUT_LIMIT,
            fds: FdTable::new(&self.preopens),
            poll_deadlines: None,
        }
    }

    /// Takes VM `vm`'s output.
    pub fn take_output(&mut self, vm: usize) -> WasiOutput {
        self.vms
            .get_mut(vm)
            .map(|v| std::mem::take(&mut v.out))
            .unwrap_or_default()
    }
}

/// Functions of another import module served beside WASI, such as warpvisor's guest API for
/// resident handlers (`crate::serve::guest_api`).
pub trait HostExtension: Send {
    /// The import module it serves.
    fn module(&self) -> &str;

    /// Checks an import of [`HostExtension::module`]: `Ok` if it serves `name` with this
    /// type, else why not (the module is then rejected with that reason).
    fn check(&self, name: &str, ty: &wasmparser::FuncType) -> Result<(), String>;

    /// Whether a successful call to `name` starts a new unit of work (a request), whose fuel
    /// and clock start over.
    fn starts_work(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// Runs function `name` for the VM whose memory `memory` is.
    fn call(
        &mut self,
        name: &str,
        memory: &mut VmMemory<'_>,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop>;
}

/// Binds the imports of `module`: WASI functions to `state`; any other import is an error
/// naming it, unless `allow_unknown` makes calls to it trap.
pub fn link(
    module: &Module<'_>,
    state: Arc<Mutex<WasiState>>,
    allow_unknown: bool,
) -> Result<Imports, VmmError> {
    link_with(module, state, allow_unknown, None)
}

/// [`link`], with the imports of `extension`'s module bound to it.
pub fn link_with(
    module: &Module<'_>,
    state: Arc<Mutex<WasiState>>,
    allow_unknown: bool,
    extension: Option<Box<dyn HostExtension>>,
) -> Result<Imports, VmmError> {
    let mut calls = Vec::new();
    for (name, kind) in &module.imports {
        let wasi = name.module == MODULE && FUNCTIONS.contains(&name.name.as_str());
        let extended = extension.as_ref().filter(|e| e.module() == name.module);
        match (kind, extended) {
            (ExportKind::Func(_), _) if wasi => calls.push(Call::Wasi(name.name.clone())),
            (ExportKind::Func(f), Some(e)) => {
                e.check(&name.name, module.func_type(*f)).map_err(|why| {
                    VmmError::Limit(format!("import `{}`.`{}`: {why}", name.module, name.name))
                })?;
                calls.push(Call::Extension(name.name.clone()));
            }
            (ExportKind::Func(_), None) if allow_unknown => calls.push(Call::Unknown),
            _ => {
                return Err(VmmError::UnknownImport {
                    module: name.module.clone(),
                    name: name.name.clone(),
                })
            }
        }
    }
    Ok(Imports {
        host: Box::new(WasiHost {
            calls,
            state,
            extension,
        }),
        ..Imports::default()
    })
}

/// What a call to one imported function runs.
enum Call {
    /// The WASI function of this name.
    Wasi(String),
    /// The extension's function of this name.
    Extension(String),
    /// Nothing: an unknown import, which traps.
    Unknown,
}

/// The hypercall handler.
struct WasiHost {
    /// For each imported function, what it runs.
    calls: Vec<Call>,
    state: Arc<Mutex<WasiState>>,
    extension: Option<Box<dyn HostExtension>>,
}

fn arg(args: &[Value], i: usize) -> u32 {
    match args.get(i) {
        Some(Value::I32(v)) => *v as u32,
        Some(Value::I64(v)) => *v as u32,
        _ => 0,
    }
}

fn arg64(args: &[Value], i: usize) -> u64 {
    match args.get(i) {
        Some(Value::I64(v)) => *v as u64,
        Some(Value::I32(v)) => *v as u32 as u64,
        _ => 0,
    }
}

impl HostFunctions for WasiHost {
    fn call(
        &mut self,
        memory: &mut VmMemory<'_>,
        import: u32,
        args: &[Value],
    ) -> Result<Vec<Value>, HostStop> {
        let vm = memory.vm();
        let name = match self.calls.get(import as usize) {
            Some(Call::Wasi(name)) => name,
            Some(Call::Extension(name)) => {
                return match &mut self.extension {
                    Some(e) => e.call(name, memory, args),
                    None => Err(HostStop::Trap(TrapKind::HostError)),
                }
            }
            Some(Call::Unknown) | None => return Err(HostStop::Trap(TrapKind::HostError)),
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let started = state.started;
        let vm_state = state
            .vms
            .get_mut(vm as usize)
            .ok_or(HostStop::Trap(TrapKind::HostError))?;
        let mut mem = GuestMemory::new(memory.reborrow());
        let result = match name.as_str() {
            "proc_exit" => return Err(HostStop::Exit(arg(args, 0))),
            "proc_raise" => return Err(HostStop::Trap(TrapKind::HostError)),
            "poll_oneoff" => {
                let a = (arg(args, 0), arg(args, 1), arg(args, 2), arg(args, 3));
                match poll::poll_oneoff(vm_state, &mut mem, a, started) {
                    Ok(poll::Poll::Park(until)) => return Err(HostStop::Wait(until)),
                    Ok(poll::Poll::Done) => Ok(()),
                    Err(e) => Err(e),
                }
            }
            other => dispatch(other, vm_state, &mut mem, args, started),
        };
        match result {
            Ok(()) => Ok(vec![Value::I32(SUCCESS as i32)]),
            Err(CallError::Errno(e)) => Ok(vec![Value::I32(e as i32)]),
            // wasmtime traps on bad pointers; its trap is a host error.
            Err(CallError::Trap) => Err(HostStop::Trap(TrapKind::HostError)),
        }
    }
}

/// Writes a list of strings the way `args_get`/`environ_get` do: a pointer per string at
/// `ptrs`, the NUL-terminated strings from `buf`. Every address is checked (a bad one traps).
fn put_strings(mem: &mut GuestMemory<'_>, list: &[String], ptrs: u32, buf: u32) -> CallResult<()> {
    let mut at = buf;
    for (i, s) in list.iter().enumerate() {
        let slot = u32::try_from(i)
            .ok()
            .and_then(|i| i.checked_mul(4))
            .and_then(|o| ptrs.checked_add(o))
            .ok_or(CallError::Trap)?;
        mem.set_u32(slot, at)?;
        let mut bytes = s.as_bytes().to_vec();
        bytes.push(0);
        mem.write(at, &bytes)?;
        at = u32::try_from(bytes.len())
            .ok()
            .and_then(|n| at.checked_add(n))
            .ok_or(CallError::Trap)?;
    }
    Ok(())
}

fn sizes(mem: &mut GuestMemory<'_>, list: &[String], count: u32, size: u32) -> CallResult<()> {
    let total: usize = list.iter().map(|s| s.len() + 1).sum();
    let count_v = u32::try_from(list.len()).map_err(|_| OVERFLOW)?;
    let total = u32::try_from(total).map_err(|_| OVERFLOW)?;
    mem.set_u32(count, count_v)?;
    mem.set_u32(size, total)
}

fn now_ns(id: u32, started: Instant) -> Result<u64, Errno> {
    match id {
        0 => Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)),
        1..=3 => Ok(started.elapsed().as_nanos() as u64 + 1),
        _ => Err(INVAL),
    }
}

/// Fills `buf` from the host's random source (`/dev/urandom`; a time-seeded xorshift where
/// it cannot be read).
fn fill_random(buf: &mut [u8]) {
    use std::io::Read;
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .is_err()
    {
        let mut x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        for v in buf.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x as u8;
        }
    }
}

/// `random_get`: the length is checked against wasmtime's limit and the buffer against the
/// VM's memory before anything is allocated.
fn random_get(mem: &mut GuestMemory<'_>, ptr: u32, len: u32) -> CallResult<()> {
    if len > RANDOM_LIMIT {
        return Err(CallError::Trap);
    }
    mem.check(ptr, len as u64, 1)?;
    let mut bytes = vec![0u8; len as usize];
    fill_random(&mut bytes);
    mem.write(ptr, &bytes)
}

fn dispatch(
    name: &str,
    st: &mut VmState,
    mem: &mut GuestMemory<'_>,
    a: &[Value],
    started: Instant,
) -> CallResult<()> {
    match name {
        "args_sizes_get" => sizes(mem, &st.argv, arg(a, 0), arg(a, 1)),
        "args_get" => put_strings(mem, &st.argv, arg(a, 0), arg(a, 1)),
        "environ_sizes_get" => sizes(mem, &st.env, arg(a, 0), arg(a, 1)),
        "environ_get" => put_strings(mem, &st.env, arg(a, 0), arg(a, 1)),
        "clock_res_get" => match arg(a, 0) {
            0..=3 => mem.set_u64(arg(a, 1), 1),
            _ => Err(INVAL.into()),
        },
        "clock_time_get" => {
            let t = now_ns(arg(a, 0), started)?;
            mem.set_u64(arg(a, 2), t)
        }
        "random_get" => random_get(mem, arg(a, 0), arg(a, 1)),
        "sched_yield" => Ok(()),
        "sock_accept" | "sock_recv" | "sock_send" | "sock_shutdown" => {
            st.fds.get(arg(a, 0))?;
            Err(NOTSOCK.into())
        }
        _ => fd::fd_call(name, st, mem, a),
    }
}
