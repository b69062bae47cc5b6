//! SIMT emulation (`PtxRuntime::load_simt`): warps in lockstep under a reconvergence stack.
//! Small kernels whose counts follow from their text check the counting exactly (divergence
//! and reconvergence, a loop that lanes leave one by one, partial warps, coalescing); the
//! corpus kernels must give under emulation exactly what they give fused.

mod common;
mod ptx_support;

use std::sync::OnceLock;

use ptx_support::*;
use warpvisor::ptx::{Arg, Dim3, PtxModule, PtxProgram, SimtCounts};

/// Hand-written kernels; comments count each block's instructions.
const KERNELS: &str = r#"
.version 7.0
.target sm_70
.address_size 64

// Odd and even lanes take different sides and store the mask of lanes converged there.
.visible .entry diverge(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];       // block A: 5 instructions
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra EVEN;
    activemask.b32 %r3;             // odd lanes: 2
    bra DONE;
EVEN:
    activemask.b32 %r3;             // even lanes: 1
DONE:
    mul.wide.u32 %rd2, %r1, 4;      // everyone again: 4
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}

// Lane l runs the loop l times: lanes leave it one per iteration.
.visible .entry spin(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];       // entry: 4
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
LOOP:
    setp.ge.u32 %p1, %r2, %r1;      // header: 2
    @%p1 bra DONE;
    add.u32 %r3, %r3, %r2;          // body: 3
    add.u32 %r2, %r2, 1;
    bra LOOP;
DONE:
    mul.wide.u32 %rd2, %r1, 4;      // exit: 4
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}

// A device function whose branch splits the warp: odd values are doubled.
.func (.param .b32 twice_ret) twice(.param .b32 twice_x)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [twice_x];    // 4
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra EVEN;
    add.u32 %r1, %r1, %r1;          // odd lanes: 1
EVEN:
    st.param.b32 [twice_ret], %r1;  // everyone: 2
    ret;
}

// Both sides of a branch return: the lanes part until the call's return site.
.func (.param .b32 early_ret) early(.param .b32 early_x)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    ld.param.b32 %r1, [early_x];    // 3
    setp.lt.u32 %p1, %r1, 8;
    @%p1 bra SMALL;
    add.u32 %r1, %r1, 100;          // lanes 8..31: 3
    st.param.b32 [early_ret], %r1;
    ret;
SMALL:
    st.param.b32 [early_ret], %r1;  // lanes 0..7: 2
    ret;
}

// Thread t stores early(t).
.visible .entry returns(.param .u64 out)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];       // 4
    mov.u32 %r1, %tid.x;
    {
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r1;
    call.uni (retval0), early, (param0);
    ld.param.b32 %r2, [retval0];    // 5, all lanes again
    }
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}

// Thread t stores twice(t), twice(twice(t)) through two calls of one subroutine.
.visible .entry calls(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];       // 4
    mov.u32 %r1, %tid.x;
    {
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r1;
    call.uni (retval0), twice, (param0);
    ld.param.b32 %r2, [retval0];    // with the next call's store and the call: 3
    }
    {
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r2;
    call.uni (retval0), twice, (param0);
    ld.param.b32 %r3, [retval0];    // 5
    }
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}

// Even lanes add one under a guard: every lane issues the add, half execute it.
.visible .entry guarded(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 add.u32 %r1, %r1, 1;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}

// Thread t stores to word t * stride.
.visible .entry strided(.param .u64 out, .param .u32 stride)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r2, [stride];
    mov.u32 %r1, %tid.x;
    mul.lo.u32 %r3, %r1, %r2;
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"#;

fn hand() -> &'static PtxProgram {
    static SIMT: OnceLock<PtxProgram> = OnceLock::new();
    SIMT.get_or_init(|| {
        let m = PtxModule::parse(KERNELS).unwrap_or_else(|e| panic!("{e}"));
        runtime()
            .load_simt(&m, None)
            .unwrap_or_else(|e| panic!("{e}"))
    })
}

/// Runs `kernel` of the hand-written module once and returns its output words and counts.
/// Tests run in parallel: one launch at a time, so that each reads only its own counts.
fn run(kernel: &str, threads: u32, words: usize, extra: &[Arg]) -> (Vec<u32>, SimtCounts) {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let p = hand();
    let before = p.simt_counts(kernel).unwrap_or_default();
    let out = runtime().buffer(words * 4).expect("buffer");
    let mut args = vec![Arg::Buffer(&out)];
    args.extend_from_slice(extra);
    p.launch(kernel, Dim3::x(1), Dim3::x(threads), 0, &args)
        .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    let after = p.simt_counts(kernel).expect("a SIMT module counts");
    (ptx_support::words(&out), after.since(&before))
}

#[test]
fn a_branch_splits_the_warp_and_it_reconverges_at_the_join() {
    let (out, c) = run("diverge", 32, 32, &[]);
    // Each side sees only its own lanes converged.
    for (t, &m) in out.iter().enumerate() {
        assert_eq!(
            m,
            if t % 2 == 1 { 0xaaaa_aaaa } else { 0x5555_5555 },
            "thread {t}"
        );
    }
    assert_eq!(c.warp_instructions, 5 + 2 + 1 + 4);
    assert_eq!(c.lane_instructions, 5 * 32 + 2 * 16 + 16 + 4 * 32);
    assert_eq!(c.divergences, 1);
    // One store of 32 consecutive words: 128 bytes, four sectors.
    assert_eq!((c.memory_instructions, c.sectors), (1, 4));
    assert!((c.efficiency() - 336.0 / 384.0).abs() < 1e-12);
}

#[test]
fn a_device_functions_branches_diverge_the_warp_of_its_caller() {
    let (out, c) = run("calls", 32, 32, &[]);
    for (t, &v) in out.iter().enumerate() {
        // Odd t doubles once (2t is even); even t stays.
        assert_eq!(v as usize, if t % 2 == 1 { 2 * t } else { t }, "thread {t}");
    }
    // The caller's first 4 (its `call` counts), the function's 4, 1 for the 16 odd lanes, 2
    // (its `ret` counts); the caller's 3 between the calls; the function's 4, no lane odd
    // (every value is even now), 2; the caller's last 5.
    assert_eq!(c.warp_instructions, 4 + 4 + 1 + 2 + 3 + 4 + 2 + 5);
    assert_eq!(c.lane_instructions, (4 + 4 + 2 + 3 + 4 + 2 + 5) * 32 + 16);
    assert_eq!(c.divergences, 1);
    assert_eq!((c.memory_instructions, c.sectors), (1, 4));
}

#[test]
fn lanes_that_return_at_different_points_reconverge_at_the_return_site() {
    let (out, c) = run("returns", 32, 32, &[]);
    for (t, &v) in out.iter().enumerate() {
        assert_eq!(v as usize, if t < 8 { t } else { t + 100 }, "thread {t}");
    }
    // Both sides end in `ret`: the branch's post-dominator is the function's exit, so the
    // sides reconverge where the call's entry does, at the return site (5 for all lanes).
    assert_eq!(c.warp_instructions, 4 + 3 + 3 + 2 + 5);
    assert_eq!(c.lane_instructions, (4 + 3 + 5) * 32 + 3 * 24 + 2 * 8);
    assert_eq!(c.divergences, 1);
    assert_eq!((c.memory_instructions, c.sectors), (1, 4));
}

#[test]
fn a_translation_with_subroutines_is_the_same_every_time() {
    // The C is the kernel cache's key; a subroutine's registers (`sub0_r1`) must sort the
    // same way in every translation, whatever order the emitter's maps hold them in.
    let m = PtxModule::parse(KERNELS).unwrap_or_else(|e| panic!("{e}"));
    let first = warpvisor::ptx::emit::emit_simt(&m)
        .unwrap_or_else(|e| panic!("{e}"))
        .code;
    assert!(first.contains("sub0_r1"), "the function was linked");
    for n in 0..8 {
        let again = warpvisor::ptx::emit::emit_simt(&m)
            .unwrap_or_else(|e| panic!("{e}"))
            .code;
        assert!(again == first, "translation {n} differs from the first");
    }
}

#[test]
fn a_call_tree_doubling_at_every_level_is_translated_once_per_function() {
    // f0 calls f1 twice, f1 calls f2 twice, ...: 2^40 copies if inlined at each call site.
    let mut ptx = String::from(".version 7.0\n.target sm_70\n.address_size 64\n");
    let levels = 40;
    ptx.push_str(&format!(
        ".func f{levels}()\n{{\n    .reg .b32 %r<9>;\n    ret;\n}}\n"
    ));
    for l in (0..levels).rev() {
        let next = l + 1;
        ptx.push_str(&format!(
            ".func f{l}()\n{{\n    .reg .b32 %r<9>;\n    call.uni f{next};\n    call.uni f{next};\n    ret;\n}}\n"
        ));
    }
    ptx.push_str(".visible .entry k()\n{\n    call.uni f0;\n    ret;\n}\n");
    let m = PtxModule::parse(&ptx).unwrap_or_else(|e| panic!("{e}"));
    let c = warpvisor::ptx::emit::emit_simt(&m)
        .unwrap_or_else(|e| panic!("{e}"))
        .code;
    // One entry per function, one return site per call.
    for l in 0..=levels {
        let entry = format!("/* subentry{l}: */");
        assert_eq!(c.matches(&entry).count(), 1, "{entry}");
    }
    let calls = 2 * levels + 1;
    for n in 0..=calls {
        let site = format!("/* subret{n}: */");
        assert_eq!(c.matches(&site).count(), usize::from(n < calls), "{site}");
    }
    assert!(c.len() < 1 << 20, "{} bytes of C", c.len());
}

#[test]
fn recursion_cannot_be_emulated_and_says_so() {
    let m = PtxModule::parse(
        r#"
.version 7.0
.target sm_70
.address_size 64
.func (.param .b32 r) down(.param .b32 x)
{
    .reg .b32 %r<2>;
    ld.param.b32 %r1, [x];
    {
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r1;
    call.uni (retval0), down, (param0);
    }
    st.param.b32 [r], %r1;
    ret;
}
.visible .entry k()
{
    .reg .b32 %r<2>;
    {
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r1;
    call.uni (retval0), down, (param0);
    }
    ret;
}
"#,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let e = match runtime().load_simt(&m, None) {
        Ok(_) => panic!("a recursive device function was emulated"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("calls `down` recursively"), "{e}");
}

#[test]
fn a_partial_warp_counts_only_its_lanes() {
    // 48 threads: a full warp and one of 16 lanes (8 odd, 8 even).
    let (out, c) = run("diverge", 48, 48, &[]);
    assert_eq!(out[33], 0xaaaa);
    assert_eq!(out[40], 0x5555);
    assert_eq!(c.warp_instructions, 2 * 12);
    assert_eq!(c.lane_instructions, 336 + (5 * 16 + 2 * 8 + 8 + 4 * 16));
    assert_eq!(c.divergences, 2);
    // The second warp's 16 words are 64 bytes: two sectors.
    assert_eq!((c.memory_instructions, c.sectors), (2, 4 + 2));
}

#[test]
fn lanes_leave_a_loop_one_by_one() {
    let (out, c) = run("spin", 32, 32, &[]);
    for (l, &v) in out.iter().enumerate() {
        assert_eq!(v as usize, l * l.saturating_sub(1) / 2, "lane {l}");
    }
    // The header runs 32 times with 32, 31, ... 1 lanes; the body 31 times with 31 ... 1.
    let header_lanes: u64 = (1..=32).sum();
    let body_lanes: u64 = (1..=31).sum();
    assert_eq!(c.warp_instructions, 4 + 2 * 32 + 3 * 31 + 4);
    assert_eq!(
        c.lane_instructions,
        4 * 32 + 2 * header_lanes + 3 * body_lanes + 4 * 32
    );
    // Every header run but the last sends one lane out and the rest round again.
    assert_eq!(c.divergences, 31);
}

#[test]
fn sectors_follow_the_access_stride() {
    for (stride, sectors) in [(1u32, 4u64), (2, 8), (4, 16), (8, 32), (64, 32)] {
        let (out, c) = run("strided", 64, 64 * stride as usize, &[Arg::U32(stride)]);
        assert_eq!(out[63 * stride as usize], 63, "stride {stride}");
        assert_eq!(
            c.memory_instructions, 2,
            "stride {stride}: one store per warp"
        );
        assert_eq!(c.sectors, 2 * sectors, "stride {stride}");
        assert_eq!(c.divergences, 0);
        assert_eq!(c.efficiency(), 1.0);
    }
}

/// A corpus kernel launched fused and under SIMT emulation: the same output buffers.
struct Case {
    program: &'static str,
    kernel: &'static str,
    grid: Dim3,
    block: Dim3,
    shared: u32,
    /// Input buffers (bytes); an output buffer is `None` with its size.
    buffers: Vec<(Option<Vec<u8>>, usize)>,
    scalars: Vec<i32>,
}

fn simt_program(which: &str) -> &'static PtxProgram {
    static CORPUS: OnceLock<PtxProgram> = OnceLock::new();
    static BENCH: OnceLock<PtxProgram> = OnceLock::new();
    let (cell, text) = match which {
        "corpus" => (&CORPUS, include_str!("ptx/corpus.ptx")),
        _ => (&BENCH, include_str!("../../warpvisor-bench/cuda/bench.ptx")),
    };
    cell.get_or_init(|| {
        let m = PtxModule::parse(text).unwrap_or_else(|e| panic!("{e}"));
        runtime()
            .load_simt(&m, None)
            .unwrap_or_else(|e| panic!("{which}: {e}"))
    })
}

fn outputs(p: &PtxProgram, case: &Case) -> Vec<Vec<u8>> {
    let bufs: Vec<_> = case
        .buffers
        .iter()
        .map(|(data, len)| match data {
            Some(d) => buf(d),
            None => runtime().buffer(*len).expect("buffer"),
        })
        .collect();
    let mut args: Vec<Arg> = bufs.iter().map(Arg::Buffer).collect();
    args.extend(case.scalars.iter().map(|&v| Arg::I32(v)));
    p.launch(case.kernel, case.grid, case.block, case.shared, &args)
        .unwrap_or_else(|e| panic!("{}: {e}", case.kernel));
    bufs.iter().map(|b| b.read()).collect()
}

#[test]
fn corpus_kernels_give_the_same_results_under_emulation() {
    // Kernels that take `n` get 1,000 elements; inputs hold enough for every thread.
    let n = 1000usize;
    let len = 2048usize;
    let floats_in = to_bytes(
        &xorshift(len, 3)
            .iter()
            .map(|&x| (x % 64) as f32)
            .collect::<Vec<_>>(),
        f32::to_le_bytes,
    );
    let ints_in = to_bytes(
        &xorshift(len, 4)
            .iter()
            .map(|&x| x % 100)
            .collect::<Vec<_>>(),
        u32::to_le_bytes,
    );
    let bytes_in: Vec<u8> = xorshift(len, 5).iter().map(|&x| x as u8).collect();
    let mut cases = Vec::new();
    for bs in [64u32, 96, 256] {
        let ctas = (n as u32).div_ceil(bs);
        let threads = (ctas * bs) as usize;
        let case = |kernel, shared, buffers, scalars| Case {
            program: if kernel == "vector_add" || kernel == "barrier_64" {
                "bench"
            } else {
                "corpus"
            },
            kernel,
            grid: Dim3::x(ctas),
            block: Dim3::x(bs),
            shared,
            buffers,
            scalars,
        };
        let f = || Some(floats_in.clone());
        let i = || Some(ints_in.clone());
        let n32 = vec![n as i32];
        cases.push(case(
            "vector_add",
            0,
            vec![(f(), 0), (f(), 0), (None, n * 4)],
            n32.clone(),
        ));
        cases.push(case(
            "sum_squares",
            0,
            vec![(f(), 0), (None, n * 4)],
            n32.clone(),
        ));
        cases.push(case(
            "scan_block",
            2 * bs * 4,
            vec![(i(), 0), (None, n * 4)],
            n32.clone(),
        ));
        let hist = vec![(Some(bytes_in.clone()), 0), (None, 1024)];
        cases.push(case("histogram_shared", 0, hist, n32.clone()));
        cases.push(case(
            "warp_ops",
            0,
            vec![(i(), 0), (None, threads * 6 * 4)],
            vec![],
        ));
        cases.push(case(
            "reduce_shared",
            bs * 4,
            vec![(f(), 0), (None, n * 4)],
            n32.clone(),
        ));
        cases.push(case(
            "reduce_shfl",
            0,
            vec![(i(), 0), (None, 4)],
            n32.clone(),
        ));
        cases.push(case(
            "barrier_64",
            bs * 4,
            vec![(None, threads * 4)],
            vec![3],
        ));
    }
    for bs in [64u32, 256] {
        let keys: Vec<u32> = xorshift(bs as usize * 4, 6);
        cases.push(Case {
            program: "corpus",
            kernel: "bitonic_sort",
            grid: Dim3::x(4),
            block: Dim3::x(bs),
            shared: bs * 4,
            buffers: vec![(Some(to_bytes(&keys, u32::to_le_bytes)), 0)],
            scalars: vec![],
        });
    }
    // 2-D blocks with lanes returning early at the ragged edges.
    let n = 50usize;
    let m = || {
        Some(to_bytes(
            &xorshift(n * n, 7)
                .iter()
                .map(|&x| (x % 10) as f32)
                .collect::<Vec<_>>(),
            f32::to_le_bytes,
        ))
    };
    cases.push(Case {
        program: "corpus",
        kernel: "matrix_mul_naive",
        grid: Dim3::new(4, 4, 1),
        block: Dim3::new(16, 16, 1),
        shared: 0,
        buffers: vec![(m(), 0), (m(), 0), (None, n * n * 4)],
        scalars: vec![n as i32],
    });
    for case in &cases {
        let fused = outputs(program(case.program), case);
        let before = simt_program(case.program)
            .simt_counts(case.kernel)
            .unwrap_or_default();
        let emulated = outputs(simt_program(case.program), case);
        assert!(
            fused == emulated,
            "{} (block {}): emulation differs from the fused run",
            case.kernel,
            case.block.x
        );
        let c = simt_program(case.program)
            .simt_counts(case.kernel)
            .expect("counts")
            .since(&before);
        assert!(c.warp_instructions > 0 && c.efficiency() > 0.0 && c.efficiency() <= 1.0);
    }
}

#[test]
fn ptx_run_simt_reports_and_writes_the_counts() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ptx-simt-cli");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let module = dir.join("faults.ptx");
    std::fs::write(&module, include_str!("ptx/faults.ptx")).expect("write ptx");
    let json = dir.join("simt.json");
    // oob(out, 1): 64 threads store their own int: two warps, four sectors each, no branch.
    let out = std::process::Command::new(common::warpvisor_bin())
        .args(["ptx", "run"])
        .arg(&module)
        .args(["--kernel", "oob", "--grid", "1", "--block", "64"])
        .args([
            "--arg",
            "buf:256",
            "--arg",
            "i32:1",
            "--simt",
            "--simt-json",
        ])
        .arg(&json)
        .output()
        .expect("run warpvisor");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("SIMT: efficiency 100.0%"), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&json).expect("json written")).expect("JSON");
    assert_eq!(v["kernel"], "oob");
    assert_eq!(v["counts"]["memory_instructions"], 2);
    assert_eq!(v["counts"]["sectors"], 8);
    assert_eq!(v["sectors_per_memory_instruction"], 4.0);
    assert_eq!(v["counts"]["guarded_off"], 0);
    assert_eq!(v["executing_efficiency"], 1.0);
}

/// A kernel of `blocks` blocks, each splitting the warp on one bit of the thread's id, run
/// twice around a loop whose back edge crosses the whole kernel.
fn long_kernel(blocks: usize) -> String {
    let mut ptx = String::from(
        ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry long(.param .u64 out)\n{\n\
         .reg .pred %p<3>;\n.reg .b32 %r<6>;\n.reg .b64 %rd<4>;\n\
         ld.param.u64 %rd1, [out];\nmov.u32 %r1, %tid.x;\nmov.u32 %r2, 0;\nmov.u32 %r4, 0;\nTOP:\n",
    );
    for b in 0..blocks {
        ptx.push_str(&format!(
            "add.u32 %r2, %r2, {b};\nand.b32 %r3, %r1, {};\nsetp.eq.u32 %p1, %r3, 0;\n@%p1 bra SKIP{b};\n\
             xor.b32 %r2, %r2, %r1;\nSKIP{b}:\n",
            1 << (b % 5)
        ));
    }
    ptx.push_str(
        "add.u32 %r4, %r4, 1;\nsetp.lt.u32 %p2, %r4, 2;\n@%p2 bra TOP;\n\
         mul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\nst.global.u32 [%rd3], %r2;\nret;\n}\n",
    );
    ptx
}

#[test]
fn a_kernel_larger_than_one_chunk_runs_as_it_does_fused() {
    let blocks = 1500;
    let m = PtxModule::parse(&long_kernel(blocks)).unwrap_or_else(|e| panic!("{e}"));
    let c = warpvisor::ptx::emit::emit_simt(&m)
        .unwrap_or_else(|e| panic!("{e}"))
        .code;
    assert!(
        c.contains("wvp_blocks_0_2("),
        "the blocks span at least three chunks"
    );
    let run = |p: &PtxProgram| {
        let out = runtime().buffer(32 * 4).expect("buffer");
        p.launch("long", Dim3::x(1), Dim3::x(32), 0, &[Arg::Buffer(&out)])
            .unwrap_or_else(|e| panic!("{e}"));
        ptx_support::words(&out)
    };
    let simt = runtime()
        .load_simt(&m, None)
        .unwrap_or_else(|e| panic!("{e}"));
    let fused = runtime().load(&m).unwrap_or_else(|e| panic!("{e}"));
    let expected: Vec<u32> = (0..32u32)
        .map(|t| {
            let mut v = 0u32;
            for _ in 0..2 {
                for b in 0..blocks as u32 {
                    v = v.wrapping_add(b);
                    if t & (1 << (b % 5)) != 0 {
                        v ^= t;
                    }
                }
            }
            v
        })
        .collect();
    assert_eq!(run(&fused), expected);
    assert_eq!(run(&simt), expected);
    let counts = simt.simt_counts("long").expect("a SIMT module counts");
    // Every block splits the warp in halves, twice around the loop.
    assert_eq!(counts.divergences, 2 * blocks as u64);
    assert_eq!(
        counts.lane_instructions,
        (4 + 2 * (blocks as u64 * 4 + 3) + 4) * 32 + 2 * blocks as u64 * 16
    );
}

#[test]
fn a_guarded_instruction_is_issued_by_every_lane_and_executed_by_some() {
    let (out, c) = run("guarded", 32, 34, &[]);
    // Thread t stores t + 1 (even) or t (odd) at that word: words 1, 3, ..., 31.
    for w in (1..32).step_by(2) {
        assert_eq!(out[w] as usize, w, "word {w}");
    }
    assert_eq!(out[0], 0);
    assert_eq!(c.warp_instructions, 9);
    assert_eq!(c.lane_instructions, 9 * 32);
    assert_eq!(c.guarded_off, 16);
    assert_eq!(c.divergences, 0);
    assert!((c.efficiency() - 1.0).abs() < 1e-12);
    assert!((c.executing_efficiency() - (9.0 * 32.0 - 16.0) / (9.0 * 32.0)).abs() < 1e-12);
}

/// Calls nested with arguments, guarded calls in a divergent loop, one function called from
/// the kernel and from another function, and a function that runs off its end.
const NESTED: &str = r#"
.version 7.0
.target sm_70
.address_size 64
.func (.param .b32 inc_ret) inc(.param .b32 inc_x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [inc_x];
    add.u32 %r2, %r1, 1;
    st.param.b32 [inc_ret], %r2;
}
.func (.param .b32 ti_ret) twice_inc(.param .b32 ti_x)
{
    .reg .b32 %r<4>;
    ld.param.b32 %r1, [ti_x];
    {
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r1;
    call.uni (retval0), inc, (param0);
    ld.param.b32 %r2, [retval0];
    }
    {
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r2;
    call.uni (retval0), inc, (param0);
    ld.param.b32 %r3, [retval0];
    }
    st.param.b32 [ti_ret], %r3;
    ret;
}
.visible .entry nested(.param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r5, %r1, 3;
    mov.u32 %r6, 0;
    mov.u32 %r2, %r1;
LOOP:
    setp.ge.u32 %p1, %r6, %r5;
    @%p1 bra DONE;
    and.b32 %r7, %r1, 4;
    setp.ne.u32 %p2, %r7, 0;
    {
    .param .b32 param0;
    .param .b32 retval0;
    st.param.b32 [param0], %r2;
    @%p2 call.uni (retval0), twice_inc, (param0);
    @!%p2 call.uni (retval0), inc, (param0);
    ld.param.b32 %r2, [retval0];
    }
    add.u32 %r6, %r6, 1;
    bra LOOP;
DONE:
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"#;

#[test]
fn nested_and_guarded_calls_in_a_divergent_loop_give_the_fused_results() {
    let m = PtxModule::parse(NESTED).unwrap_or_else(|e| panic!("{e}"));
    let run = |p: &PtxProgram| {
        let out = runtime().buffer(64 * 4).expect("buffer");
        p.launch("nested", Dim3::x(1), Dim3::x(64), 0, &[Arg::Buffer(&out)])
            .unwrap_or_else(|e| panic!("{e}"));
        ptx_support::words(&out)
    };
    let expected: Vec<u32> = (0..64u32)
        .map(|t| t + (t & 3) * if t & 4 != 0 { 2 } else { 1 })
        .collect();
    let fused = runtime().load(&m).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run(&fused), expected, "fused");
    let simt = runtime()
        .load_simt(&m, None)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run(&simt), expected, "SIMT");
    let c = simt.simt_counts("nested").expect("a SIMT module counts");
    // Lanes leave the loop after 0-3 trips and split between the two calls.
    assert!(c.divergences > 0 && c.efficiency() < 1.0, "{c:?}");
}

#[test]
fn a_call_chain_deeper_than_the_old_stack_runs() {
    // Each call level holds an entry of the warp's reconvergence stack until it returns.
    let depth = 300;
    let mut ptx = String::from(".version 7.0\n.target sm_70\n.address_size 64\n");
    ptx.push_str(&format!(".func f{depth}()\n{{\n    ret;\n}}\n"));
    for l in (0..depth).rev() {
        ptx.push_str(&format!(
            ".func f{l}()\n{{\n    call.uni f{};\n    ret;\n}}\n",
            l + 1
        ));
    }
    ptx.push_str(
        ".visible .entry deep(.param .u64 out)\n{\n.reg .b32 %r<2>;\n.reg .b64 %rd<4>;\n\
         ld.param.u64 %rd1, [out];\ncall.uni f0;\nmov.u32 %r1, %tid.x;\n\
         mul.wide.u32 %rd2, %r1, 4;\nadd.s64 %rd3, %rd1, %rd2;\nst.global.u32 [%rd3], %r1;\nret;\n}\n",
    );
    let m = PtxModule::parse(&ptx).unwrap_or_else(|e| panic!("{e}"));
    let simt = runtime()
        .load_simt(&m, None)
        .unwrap_or_else(|e| panic!("{e}"));
    let out = runtime().buffer(32 * 4).expect("buffer");
    simt.launch("deep", Dim3::x(1), Dim3::x(32), 0, &[Arg::Buffer(&out)])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ptx_support::words(&out), (0..32).collect::<Vec<u32>>());
    let c = simt.simt_counts("deep").expect("a SIMT module counts");
    // Every level: its call and its return; the kernel's 7; the leaf's return.
    assert_eq!(c.warp_instructions, 2 * depth as u64 + 7 + 1);
    assert_eq!(c.efficiency(), 1.0);
}
