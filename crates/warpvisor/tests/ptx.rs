//! PTX on the CPU (`warpvisor::ptx`): what is rejected and how, faults and deadlocks reported
//! as errors, argument checks, and the `warpvisor ptx` command. The corpus of CUDA programs
//! checked against Rust references is `ptx_corpus.rs`.

mod common;

use std::sync::OnceLock;

use warpvisor::ptx::{Arg, Dim3, PtxError, PtxModule, PtxProgram, PtxRuntime};

fn runtime() -> &'static PtxRuntime {
    static RT: OnceLock<PtxRuntime> = OnceLock::new();
    RT.get_or_init(|| PtxRuntime::new().expect("a C compiler"))
}

/// NVRTC 12.9's PTX (compute_70) for:
/// ```cuda
/// extern "C" __global__ void diverge(int *out) {
///     int v = threadIdx.x;
///     if (threadIdx.x & 1) v = __shfl_down_sync(0xffffffff, v, 1);
///     else v = __shfl_up_sync(0xffffffff, v, 1);
///     out[threadIdx.x] = v;
/// }
/// extern "C" __global__ void oob(int *out, int n) { out[threadIdx.x * n] = 1; }
/// extern "C" __global__ void shared_oob(int *out, int k) {
///     extern __shared__ int s[]; s[threadIdx.x + k] = 1; __syncthreads();
///     out[threadIdx.x] = s[threadIdx.x];
/// }
/// ```
const FAULTS: &str = include_str!("ptx/faults.ptx");

fn ints(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// `text` parsed and loaded into the shared runtime.
fn load(text: &str) -> PtxProgram {
    runtime()
        .load(&PtxModule::parse(text).expect("parse"))
        .expect("load")
}

#[test]
fn out_of_bounds_global_and_shared_accesses_are_illegal_addresses() {
    let rt = runtime();
    let program = load(FAULTS);
    let out = rt.buffer(64 * 4).expect("buffer");
    // In bounds: every thread writes its own element.
    program
        .launch(
            "oob",
            Dim3::x(1),
            Dim3::x(64),
            0,
            &[Arg::Buffer(&out), Arg::I32(1)],
        )
        .expect("in bounds");
    assert_eq!(ints(&out.read()), vec![1; 64]);
    // Stride 2: threads 32.. write past the end.
    let e = program
        .launch(
            "oob",
            Dim3::x(1),
            Dim3::x(64),
            0,
            &[Arg::Buffer(&out), Arg::I32(2)],
        )
        .expect_err("past the end");
    // The first thread past the end (threads run in order within the CTA) and the store's
    // line in faults.ptx are named.
    match &e {
        PtxError::IllegalAddress {
            address,
            thread,
            line,
            ..
        } => {
            assert_eq!(*address, out.address() + 256, "{e}");
            assert_eq!((*thread, *line), ([32, 0, 0], 54), "{e}");
        }
        other => panic!("expected an illegal address, got {other}"),
    }
    assert!(e.to_string().contains("PTX line 54"), "{e}");
    assert_eq!(e.cuda_code(), 700, "CUDA_ERROR_ILLEGAL_ADDRESS");
    // Shared memory: 64 ints of dynamic shared memory, written at an offset.
    program
        .launch(
            "shared_oob",
            Dim3::x(1),
            Dim3::x(64),
            256,
            &[Arg::Buffer(&out), Arg::I32(0)],
        )
        .expect("shared in bounds");
    let e = program
        .launch(
            "shared_oob",
            Dim3::x(2),
            Dim3::x(64),
            256,
            &[Arg::Buffer(&out), Arg::I32(1)],
        )
        .expect_err("shared past the end");
    assert!(
        e.to_string().contains("illegal address 0x100 in CTA"),
        "the first faulting offset is 256: {e}"
    );
}

#[test]
fn lanes_of_a_warp_at_different_shuffles_are_a_deadlock_not_a_hang() {
    let rt = runtime();
    let program = load(FAULTS);
    let out = rt.buffer(32 * 4).expect("buffer");
    let e = program
        .launch("diverge", Dim3::x(1), Dim3::x(32), 0, &[Arg::Buffer(&out)])
        .expect_err("divergent shuffles");
    assert!(matches!(e, PtxError::Deadlock { .. }), "{e}");
}

#[test]
fn arguments_and_launch_shapes_are_checked() {
    let rt = runtime();
    let program = load(FAULTS);
    let out = rt.buffer(16).expect("buffer");
    let cases: Vec<(Result<(), PtxError>, &str)> = vec![
        (
            program.launch("oob", Dim3::x(1), Dim3::x(1), 0, &[Arg::Buffer(&out)]),
            "takes 2 parameters, 1 given",
        ),
        (
            program.launch(
                "oob",
                Dim3::x(1),
                Dim3::x(1),
                0,
                &[Arg::Buffer(&out), Arg::I64(1)],
            ),
            "parameter 1 is 4 bytes, the argument 8 bytes",
        ),
        (
            program.launch(
                "oob",
                Dim3::x(1),
                Dim3::x(1025),
                0,
                &[Arg::Buffer(&out), Arg::I32(0)],
            ),
            "1025 threads per block",
        ),
        (
            program.launch(
                "oob",
                Dim3::new(1, 65536, 1),
                Dim3::x(1),
                0,
                &[Arg::Buffer(&out), Arg::I32(0)],
            ),
            "grid dimension 1 is 65536",
        ),
        (
            program.launch(
                "shared_oob",
                Dim3::x(1),
                Dim3::x(1),
                1 << 20,
                &[Arg::Buffer(&out), Arg::I32(0)],
            ),
            "bytes of shared memory",
        ),
        (
            program.launch("missing", Dim3::x(1), Dim3::x(1), 0, &[]),
            "no kernel named `missing`",
        ),
    ];
    for (result, message) in cases {
        let e = result.expect_err(message).to_string();
        assert!(e.contains(message), "`{e}` should say `{message}`");
    }
}

#[test]
fn malformed_and_unsupported_ptx_is_rejected_naming_the_line() {
    let header = ".version 8.8\n.target sm_70\n.address_size 64\n";
    let cases = [
        (format!("{header}.visible .entry k()\n{{\n\tret\n}}"), "PTX line 7: unexpected operand"),
        (format!("{header}.entry k()\n{{\n\t.reg .f16 %h<2>;\n\tret;\n}}"), "PTX line 4: unsupported: register %h0 of type .f16"),
        (
            format!("{header}.entry k()\n{{\n\t.reg .b32 %r<2>;\n\tmatch.any.sync.b32 %r0, %r1, -1;\n\tret;\n}}"),
            "PTX line 7: unsupported: `match.any.sync.b32` is not supported",
        ),
        (format!("{header}.entry k()\n{{\n\tmov.u32 %r9, 1;\n\tret;\n}}"), "PTX line 6: unsupported: `mov.u32` uses undeclared register %r9"),
        (format!("{header}.entry k()\n{{\n\tbra $L_nowhere;\n}}"), "PTX line 6: unsupported: `bra` branches to undefined label `$L_nowhere`"),
        ("garbage".to_string(), "PTX line 1: unsupported directive `garbage`"),
        (format!("{header}.entry k()\n{{\n\t.reg .b32 %r<2000000000>;\n\tret;\n}}"), "PTX line 6: declares %r<2000000000>: more than 1048576 registers"),
        (format!("{header}.entry k()\n{{\n\t.reg .b32 %r<-1>;\n\tret;\n}}"), "PTX line 6: declares %r<-1>: a negative register count"),
    ];
    let rt = runtime();
    for (text, message) in cases {
        let e = PtxModule::parse(&text).and_then(|m| rt.load(&m).map(|_| ()));
        let e = e.expect_err(message).to_string();
        assert!(
            e.starts_with(message),
            "`{e}` should start with `{message}`"
        );
    }
}

#[test]
fn ptx_run_launches_a_kernel_and_saves_its_buffers() {
    let dir = std::env::temp_dir().join(format!("warpvisor-ptx-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let module = dir.join("faults.ptx");
    std::fs::write(&module, FAULTS).expect("write ptx");
    let saved = dir.join("out.bin");
    let out = std::process::Command::new(common::warpvisor_bin())
        .args(["ptx", "run"])
        .arg(&module)
        .args([
            "--kernel",
            "oob",
            "--grid",
            "2",
            "--block",
            "8",
            "--arg",
            "buf:64:byte=7",
            "--arg",
            "i32:1",
        ])
        .arg("--save")
        .arg(format!("0={}", saved.display()))
        .output()
        .expect("run warpvisor");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Both CTAs' 8 threads write element tid (= 1); the rest keep the pattern.
    let mut want = vec![7u8; 64];
    for e in 0..8 {
        want[e * 4..e * 4 + 4].copy_from_slice(&1i32.to_le_bytes());
    }
    assert_eq!(std::fs::read(&saved).expect("saved"), want);
    let bad = std::process::Command::new(common::warpvisor_bin())
        .args(["ptx", "run"])
        .arg(&module)
        .args([
            "--kernel", "oob", "--grid", "1", "--block", "8", "--arg", "buf:4", "--arg", "i32:1",
        ])
        .output()
        .expect("run warpvisor");
    assert_eq!(bad.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("illegal address"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// NVRTC 12.9's PTX (compute_70) for:
/// ```cuda
/// __device__ __noinline__ int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
/// __device__ __noinline__ float dot3(const float *a, int k) {
///     float v[3];
///     for (int i = 0; i < 3; i++) v[i] = a[i] * (float)(k + i);
///     return v[k % 3] + v[0];
/// }
/// extern "C" __global__ void calls(int *fibs, float *dots, const float *a, int depth) {
///     int t = threadIdx.x + blockIdx.x * blockDim.x;
///     fibs[t] = fib(t % depth);
///     dots[t] = dot3(a, t);
/// }
/// __device__ __noinline__ unsigned deep(unsigned n) { return n == 0 ? 1u : deep(n - 1) * 3u + n; }
/// extern "C" __global__ void recurse(unsigned *out, unsigned n) { out[threadIdx.x] = deep(n + threadIdx.x); }
/// ```
const CALLS: &str = include_str!("ptx/calls.ptx");

#[test]
fn device_functions_recurse_and_keep_local_arrays_in_their_frames() {
    let rt = runtime();
    let program = load(CALLS);
    let (blocks, threads) = (3u32, 64u32);
    let n = (blocks * threads) as usize;
    let fibs = rt.buffer(n * 4).expect("buffer");
    let dots = rt.buffer(n * 4).expect("buffer");
    let a: Vec<u8> = [1.5f32, -2.0, 0.25]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let a = rt.buffer_from(&a).expect("buffer");
    program
        .launch(
            "calls",
            Dim3::x(blocks),
            Dim3::x(threads),
            0,
            &[
                Arg::Buffer(&fibs),
                Arg::Buffer(&dots),
                Arg::Buffer(&a),
                Arg::I32(20),
            ],
        )
        .expect("launch");
    fn fib(n: i32) -> i32 {
        if n < 2 {
            n
        } else {
            fib(n - 1) + fib(n - 2)
        }
    }
    let want_fib: Vec<i32> = (0..n as i32).map(|t| fib(t % 20)).collect();
    assert_eq!(ints(&fibs.read()), want_fib);
    let av = [1.5f32, -2.0, 0.25];
    let want_dots: Vec<f32> = (0..n as i32)
        .map(|k| {
            let v: Vec<f32> = (0..3).map(|i| av[i as usize] * (k + i) as f32).collect();
            v[(k % 3) as usize] + v[0]
        })
        .collect();
    let got: Vec<f32> = dots
        .read()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, want_dots);
}

#[test]
fn deep_recursion_is_bounded_and_runaway_recursion_is_an_error() {
    let rt = runtime();
    let program = load(CALLS);
    let out = rt.buffer(8).expect("buffer");
    fn deep(n: u32) -> u32 {
        (0..=n).fold(0u32, |acc, k| {
            if k == 0 {
                1
            } else {
                acc.wrapping_mul(3).wrapping_add(k)
            }
        })
    }
    // 1,000 calls deep: within the frame stack.
    program
        .launch(
            "recurse",
            Dim3::x(1),
            Dim3::x(2),
            0,
            &[Arg::Buffer(&out), Arg::U32(1000)],
        )
        .expect("1,000 deep");
    let got: Vec<u32> = ints(&out.read()).into_iter().map(|v| v as u32).collect();
    assert_eq!(got, vec![deep(1000), deep(1001)]);
    // A million calls deep: the frame stack runs out, the host's does not.
    let e = program
        .launch(
            "recurse",
            Dim3::x(1),
            Dim3::x(1),
            0,
            &[Arg::Buffer(&out), Arg::U32(1_000_000)],
        )
        .expect_err("a million deep");
    assert!(matches!(e, PtxError::StackOverflow { .. }), "{e}");
}

/// Hand-written: local memory reached through pointers passed down calls (`cvta.local` in the
/// caller, `cvta.to.local` + `ld.local`/`st.local` in the callee), two calls deep.
const LOCAL_POINTERS: &str = include_str!("ptx/local_pointers.ptx");

/// The 1-based line of the first line of `text` containing `needle` after `after`.
fn line_of(text: &str, after: &str, needle: &str) -> usize {
    let start = text.find(after).expect("anchor");
    let at = start + text[start..].find(needle).expect("needle");
    text[..at].lines().count()
}

#[test]
fn local_pointers_reach_callers_frames_and_nothing_else() {
    let rt = runtime();
    let program = load(LOCAL_POINTERS);
    let threads = 96u32;
    let out = rt.buffer(threads as usize * 4).expect("buffer");
    program
        .launch(
            "local_pointers",
            Dim3::x(2),
            Dim3::x(threads),
            0,
            &[Arg::Buffer(&out)],
        )
        .expect("launch");
    let want: Vec<i32> = (0..threads as i32).map(|t| 11 * t + 8001).collect();
    assert_eq!(ints(&out.read()), want);

    // A pointer into a frame that has returned, and one into another thread's depot.
    for (kernel, needle) in [
        ("use_after_return", "%r1, [%rd3];"),
        ("neighbours_local", "%r1, [%rd2];"),
    ] {
        let e = program
            .launch(kernel, Dim3::x(1), Dim3::x(8), 0, &[Arg::Buffer(&out)])
            .expect_err(kernel);
        let want_line = line_of(LOCAL_POINTERS, &format!(".entry {kernel}("), needle);
        match &e {
            PtxError::IllegalAddress { thread, line, .. } => {
                assert_eq!((*thread, *line), ([0, 0, 0], want_line), "{kernel}: {e}")
            }
            other => panic!("{kernel}: expected an illegal address, got {other}"),
        }
    }
}
