//! CUDA programs on the CPU, each checked against a Rust reference for block sizes from 32 to
//! 1,024 where the block size is free. Sources: `tests/ptx/src/corpus.cu` (→ `ptx/corpus.ptx`),
//! (`ptx_science.rs` has the numerical programs)
//! and the benchmark kernels `crates/warpvisor-bench/cuda/bench.cu` (→ `bench.ptx`: vectorAdd,
//! tiled matrixMul, reduction, and `barrier_64`, a `bar.sync` inside a loop with 64 values
//! live across it). The PTX is NVRTC's, committed so that these run without NVRTC; the
//! `tests/ptx/*.ptx` are rebuilt from `tests/ptx/src/*.cu` with `python3 scripts/build-ptx.py`
//! (`--check` says whether the committed PTX is NVRTC's output for the sources).

mod common;
mod ptx_support;

use ptx_support::*;
use warpvisor::ptx::{Arg, Dim3, PtxModule};

#[test]
fn vector_add_for_every_block_size_and_ragged_ends() {
    let n = 3000usize;
    let a: Vec<f32> = xorshift(n, 1)
        .iter()
        .map(|&x| (x % 1000) as f32 / 7.0)
        .collect();
    let b: Vec<f32> = xorshift(n, 2)
        .iter()
        .map(|&x| (x % 1000) as f32 / 3.0)
        .collect();
    for bs in BLOCKS.iter().copied().chain([96, 200]) {
        let (da, db) = (
            buf(&to_bytes(&a, f32::to_le_bytes)),
            buf(&to_bytes(&b, f32::to_le_bytes)),
        );
        let dc = runtime().buffer(n * 4).expect("buffer");
        program("bench")
            .launch(
                "vector_add",
                Dim3::x((n as u32).div_ceil(bs)),
                Dim3::x(bs),
                0,
                &[
                    Arg::Buffer(&da),
                    Arg::Buffer(&db),
                    Arg::Buffer(&dc),
                    Arg::I32(n as i32),
                ],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
        assert_eq!(floats(&dc), want, "block {bs}");
    }
}

#[test]
fn tiled_matrix_mul_matches_the_same_summation_order() {
    let n = 64usize;
    let a: Vec<f32> = xorshift(n * n, 3)
        .iter()
        .map(|&x| (x % 100) as f32 / 10.0)
        .collect();
    let b: Vec<f32> = xorshift(n * n, 4)
        .iter()
        .map(|&x| (x % 100) as f32 / 10.0)
        .collect();
    let (da, db) = (
        buf(&to_bytes(&a, f32::to_le_bytes)),
        buf(&to_bytes(&b, f32::to_le_bytes)),
    );
    let dc = runtime().buffer(n * n * 4).expect("buffer");
    program("bench")
        .launch(
            "matrix_mul",
            Dim3::new(4, 4, 1),
            Dim3::new(16, 16, 1),
            0,
            &[
                Arg::Buffer(&da),
                Arg::Buffer(&db),
                Arg::Buffer(&dc),
                Arg::I32(n as i32),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    // The kernel adds products k = 0..n in order; NVRTC contracts each multiply-add into one
    // fma.rn.f32 (its default --fmad=true), which the translation keeps exact.
    let mut want = vec![0f32; n * n];
    for r in 0..n {
        for c in 0..n {
            let mut s = 0f32;
            for k in 0..n {
                s = a[r * n + k].mul_add(b[k * n + c], s);
            }
            want[r * n + c] = s;
        }
    }
    assert_eq!(floats(&dc), want);
}

#[test]
fn shared_memory_reduction_for_every_block_size() {
    let n = 5000usize;
    let input: Vec<f32> = xorshift(n, 5).iter().map(|&x| (x % 16) as f32).collect();
    for bs in BLOCKS.iter().copied().chain([96, 200]) {
        // The tree needs a power of two; 96 and 200 check the kernel's guard on `t < k` only
        // through vector_add, so round those down here.
        let bs = if bs.is_power_of_two() {
            bs
        } else {
            bs.next_power_of_two() / 2
        };
        let blocks = (n as u32).div_ceil(2 * bs);
        let din = buf(&to_bytes(&input, f32::to_le_bytes));
        let dout = runtime().buffer(blocks as usize * 4).expect("buffer");
        program("bench")
            .launch(
                "reduce",
                Dim3::x(blocks),
                Dim3::x(bs),
                bs * 4,
                &[Arg::Buffer(&din), Arg::Buffer(&dout), Arg::I32(n as i32)],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        // Small integers: every partial sum is exact, so any order gives the same total.
        let total: f32 = floats(&dout).iter().sum();
        assert_eq!(total, input.iter().sum::<f32>(), "block {bs}");
    }
}

#[test]
fn barrier_in_a_loop_with_64_live_values_for_every_block_size() {
    let iters = 5;
    for bs in BLOCKS {
        let blocks = 2u32;
        let out = runtime()
            .buffer((blocks * bs) as usize * 4)
            .expect("buffer");
        program("bench")
            .launch(
                "barrier_64",
                Dim3::x(blocks),
                Dim3::x(bs),
                bs * 4,
                &[Arg::Buffer(&out), Arg::I32(iters)],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        // Reference: v_j = t + j; each iteration every thread reads its right neighbour's v0
        // (as it was before the iteration) and sets v_j = v_j * 0.5 + n.
        let mut v: Vec<Vec<f32>> = (0..bs)
            .map(|t| (0..64).map(|j| t as f32 + j as f32).collect())
            .collect();
        for _ in 0..iters {
            let v0: Vec<f32> = v.iter().map(|x| x[0]).collect();
            for (t, vt) in v.iter_mut().enumerate() {
                let n = v0[(t + 1) % bs as usize];
                for x in vt.iter_mut() {
                    *x = *x * 0.5 + n;
                }
            }
        }
        let want: Vec<f32> = v
            .iter()
            .map(|vt| vt.iter().fold(0f32, |s, x| s + x))
            .collect();
        let got = floats(&out);
        for b in 0..blocks as usize {
            assert_eq!(
                &got[b * bs as usize..(b + 1) * bs as usize],
                &want[..],
                "block size {bs}"
            );
        }
    }
}

#[test]
fn transpose_through_a_shared_tile() {
    let (w, h) = (96usize, 64usize);
    let input: Vec<f32> = (0..w * h).map(|i| i as f32).collect();
    let din = buf(&to_bytes(&input, f32::to_le_bytes));
    let dout = runtime().buffer(w * h * 4).expect("buffer");
    program("corpus")
        .launch(
            "transpose_shared",
            Dim3::new(3, 2, 1),
            Dim3::new(32, 8, 1),
            0,
            &[
                Arg::Buffer(&din),
                Arg::Buffer(&dout),
                Arg::I32(w as i32),
                Arg::I32(h as i32),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let got = floats(&dout);
    for y in 0..h {
        for x in 0..w {
            assert_eq!(got[x * h + y], input[y * w + x], "({x}, {y})");
        }
    }
}

#[test]
fn block_scan_for_every_block_size() {
    let n = 2500usize;
    let input: Vec<i32> = xorshift(n, 6)
        .iter()
        .map(|&x| (x % 50) as i32 - 25)
        .collect();
    for bs in BLOCKS {
        let din = buf(&to_bytes(&input, i32::to_le_bytes));
        let dout = runtime().buffer(n * 4).expect("buffer");
        program("corpus")
            .launch(
                "scan_block",
                Dim3::x((n as u32).div_ceil(bs)),
                Dim3::x(bs),
                2 * bs * 4,
                &[Arg::Buffer(&din), Arg::Buffer(&dout), Arg::I32(n as i32)],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        let mut want = Vec::with_capacity(n);
        for chunk in input.chunks(bs as usize) {
            let mut s = 0i32;
            for &x in chunk {
                s += x;
                want.push(s);
            }
        }
        let got: Vec<i32> = words(&dout).into_iter().map(|w| w as i32).collect();
        assert_eq!(got, want, "block {bs}");
    }
}

/// `kernel(in, bins, n)` over 20,000 bytes (`xorshift(seed) >> shift`) on `ctas` CTAs gives
/// the bytes' histogram for every block size.
fn check_histogram(kernel: &str, ctas: u32, seed: u32, shift: u32) {
    let n = 20_000usize;
    let input: Vec<u8> = xorshift(n, seed)
        .iter()
        .map(|&x| (x >> shift) as u8)
        .collect();
    let mut want = vec![0u32; 256];
    for &b in &input {
        want[b as usize] += 1;
    }
    for bs in BLOCKS {
        let din = buf(&input);
        let bins = runtime().buffer(256 * 4).expect("buffer");
        program("corpus")
            .launch(
                kernel,
                Dim3::x(ctas),
                Dim3::x(bs),
                0,
                &[Arg::Buffer(&din), Arg::Buffer(&bins), Arg::I32(n as i32)],
            )
            .unwrap_or_else(|e| panic!("{kernel}, block {bs}: {e}"));
        assert_eq!(words(&bins), want, "{kernel}, block {bs}");
    }
}

#[test]
fn histogram_with_shared_and_global_atomics_for_every_block_size() {
    check_histogram("histogram_shared", 6, 7, 3);
}

#[test]
fn bitonic_sort_of_each_block_for_every_block_size() {
    for bs in BLOCKS {
        let blocks = 3usize;
        let keys: Vec<u32> = xorshift(blocks * bs as usize, 8 + bs);
        let data = buf(&to_bytes(&keys, u32::to_le_bytes));
        program("corpus")
            .launch(
                "bitonic_sort",
                Dim3::x(blocks as u32),
                Dim3::x(bs),
                bs * 4,
                &[Arg::Buffer(&data)],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        let mut want = keys.clone();
        for chunk in want.chunks_mut(bs as usize) {
            chunk.sort_unstable();
        }
        assert_eq!(words(&data), want, "block {bs}");
    }
}

#[test]
fn warp_votes_and_shuffles_for_every_block_size() {
    for bs in BLOCKS {
        let n = 2 * bs as usize;
        let input: Vec<i32> = xorshift(n, 9).iter().map(|&x| (x % 1000) as i32).collect();
        let din = buf(&to_bytes(&input, i32::to_le_bytes));
        let dout = runtime().buffer(n * 6 * 4).expect("buffer");
        program("corpus")
            .launch(
                "warp_ops",
                Dim3::x(2),
                Dim3::x(bs),
                0,
                &[Arg::Buffer(&din), Arg::Buffer(&dout)],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        let got: Vec<i32> = words(&dout).into_iter().map(|w| w as i32).collect();
        for (i, o) in got.chunks(6).enumerate() {
            let warp = &input[i / 32 * 32..i / 32 * 32 + 32];
            let lane = i % 32;
            let ballot = warp
                .iter()
                .enumerate()
                .fold(0u32, |m, (l, v)| m | (((v & 1) as u32) << l));
            let up = if lane >= 3 {
                warp[lane - 3]
            } else {
                warp[lane]
            };
            let want = [
                ballot as i32,
                warp.iter().any(|&v| v > 900) as i32,
                1,
                warp[0],
                up,
                warp[lane ^ 5] + lane as i32,
            ];
            assert_eq!(o, want, "block {bs}, thread {i}");
        }
    }
}

#[test]
fn warp_shuffle_reduction_for_every_block_size() {
    let n = 4000usize;
    let input: Vec<f32> = xorshift(n, 10).iter().map(|&x| (x % 8) as f32).collect();
    for bs in BLOCKS {
        let blocks = (n as u32).div_ceil(bs);
        let din = buf(&to_bytes(&input, f32::to_le_bytes));
        let dout = runtime().buffer(blocks as usize * 4).expect("buffer");
        program("corpus")
            .launch(
                "sum_squares",
                Dim3::x(blocks),
                Dim3::x(bs),
                0,
                &[Arg::Buffer(&din), Arg::Buffer(&dout), Arg::I32(n as i32)],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        // Squares of 0..7 and their sums are exact in f32 at this size.
        let want: Vec<f32> = input
            .chunks(bs as usize)
            .map(|c| c.iter().map(|x| x * x).sum())
            .collect();
        assert_eq!(floats(&dout), want, "block {bs}");
    }
}

/// The corpus compiled by this machine's NVRTC (PyPI's in CI) instead of the committed PTX:
/// the same kernels must give the same results.
#[test]
fn fresh_nvrtc_ptx_of_the_corpus_gives_the_same_results() {
    match warpvisor::backend::cuda::nvrtc_status() {
        Ok(_) => {}
        Err(e) if std::env::var_os("WARPVISOR_REQUIRE_NVRTC").is_some() => {
            panic!("WARPVISOR_REQUIRE_NVRTC is set but {e}")
        }
        Err(e) => {
            eprintln!("NOT RUN: {e}");
            return;
        }
    }
    let source = include_str!("ptx/src/corpus.cu");
    let options = cudarc::nvrtc::CompileOptions {
        arch: Some("compute_70"),
        options: vec!["-default-device".into()],
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(source, options)
        .unwrap_or_else(|e| panic!("NVRTC: {e:?}"));
    let fresh = runtime()
        .load(&PtxModule::parse(&ptx.to_src()).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"));
    let keys = xorshift(3 * 256, 77);
    let mut results = Vec::new();
    for p in [program("corpus"), &fresh] {
        let data = buf(&to_bytes(&keys, u32::to_le_bytes));
        p.launch(
            "bitonic_sort",
            Dim3::x(3),
            Dim3::x(256),
            256 * 4,
            &[Arg::Buffer(&data)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let input: Vec<i32> = keys.iter().map(|&k| (k % 1000) as i32).collect();
        let din = buf(&to_bytes(&input, i32::to_le_bytes));
        let dout = runtime().buffer(input.len() * 6 * 4).expect("buffer");
        p.launch(
            "warp_ops",
            Dim3::x(3),
            Dim3::x(256),
            0,
            &[Arg::Buffer(&din), Arg::Buffer(&dout)],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        results.push((words(&data), words(&dout)));
    }
    assert!(
        results[0] == results[1],
        "the fresh PTX gives other results"
    );
}

#[test]
fn naive_transpose_for_2d_blocks_of_32_to_1024_threads() {
    let (w, h) = (100usize, 70usize);
    let input: Vec<f32> = (0..w * h).map(|i| i as f32).collect();
    // out[x * h + y] = in[y * w + x]
    let want: Vec<f32> = (0..w * h).map(|i| input[(i % h) * w + i / h]).collect();
    for (bx, by) in [
        (32u32, 1u32),
        (16, 4),
        (32, 8),
        (16, 16),
        (32, 16),
        (32, 32),
    ] {
        let din = buf(&to_bytes(&input, f32::to_le_bytes));
        let dout = runtime().buffer(w * h * 4).expect("buffer");
        program("corpus")
            .launch(
                "transpose_naive",
                Dim3::new((w as u32).div_ceil(bx), (h as u32).div_ceil(by), 1),
                Dim3::new(bx, by, 1),
                0,
                &[
                    Arg::Buffer(&din),
                    Arg::Buffer(&dout),
                    Arg::I32(w as i32),
                    Arg::I32(h as i32),
                ],
            )
            .unwrap_or_else(|e| panic!("block {bx}x{by}: {e}"));
        assert_eq!(floats(&dout), want, "block {bx}x{by}");
    }
}

#[test]
fn naive_matrix_mul_with_ragged_edges_matches_the_same_summation_order() {
    let n = 40usize;
    let a: Vec<f32> = xorshift(n * n, 21)
        .iter()
        .map(|&x| (x % 100) as f32 / 10.0)
        .collect();
    let b: Vec<f32> = xorshift(n * n, 22)
        .iter()
        .map(|&x| (x % 100) as f32 / 10.0)
        .collect();
    // Products k = 0..n in order, each multiply-add one fma.rn.f32 (NVRTC's contraction).
    let mut want = vec![0f32; n * n];
    for r in 0..n {
        for c in 0..n {
            let mut s = 0f32;
            for k in 0..n {
                s = a[r * n + k].mul_add(b[k * n + c], s);
            }
            want[r * n + c] = s;
        }
    }
    // n = 40 is no multiple of the block's sides: the kernel's guard leaves the rest idle.
    for side in [16u32, 32] {
        let (da, db) = (
            buf(&to_bytes(&a, f32::to_le_bytes)),
            buf(&to_bytes(&b, f32::to_le_bytes)),
        );
        let dc = runtime().buffer(n * n * 4).expect("buffer");
        let g = (n as u32).div_ceil(side);
        program("corpus")
            .launch(
                "matrix_mul_naive",
                Dim3::new(g, g, 1),
                Dim3::new(side, side, 1),
                0,
                &[
                    Arg::Buffer(&da),
                    Arg::Buffer(&db),
                    Arg::Buffer(&dc),
                    Arg::I32(n as i32),
                ],
            )
            .unwrap_or_else(|e| panic!("block {side}x{side}: {e}"));
        assert_eq!(floats(&dc), want, "block {side}x{side}");
    }
}

#[test]
fn histogram_with_global_atomics_only_for_every_block_size() {
    check_histogram("histogram_global", 4, 23, 5);
}

/// `reduce_shared`'s partial sums, in its order: each thread's grid-stride sum, then the tree
/// over the next power of two above the block size (a step adds `s[t + k]` into `s[t]` for
/// `t < k` where `t + k` is in the block).
fn reduce_shared_reference(input: &[f32], blocks: usize, bs: usize) -> Vec<f32> {
    let stride = blocks * bs;
    (0..blocks)
        .map(|b| {
            let mut s: Vec<f32> = (0..bs)
                .map(|t| {
                    let mut v = 0f32;
                    let mut i = b * bs + t;
                    while i < input.len() {
                        v += input[i];
                        i += stride;
                    }
                    v
                })
                .collect();
            let mut k = bs.next_power_of_two() / 2;
            while k > 0 {
                for t in 0..k {
                    if t + k < bs {
                        s[t] += s[t + k];
                    }
                }
                k /= 2;
            }
            s[0]
        })
        .collect()
}

#[test]
fn shared_reduction_for_every_block_size_including_96_and_200_threads() {
    let n = 5000usize;
    // Values whose sums round: the partial sums must be the kernel's, in the kernel's order.
    let input: Vec<f32> = xorshift(n, 24)
        .iter()
        .map(|&x| (x % 10_000) as f32 / 977.0)
        .collect();
    let blocks = 3usize;
    for bs in BLOCKS.iter().copied().chain([96, 200]) {
        let din = buf(&to_bytes(&input, f32::to_le_bytes));
        let dout = runtime().buffer(blocks * 4).expect("buffer");
        program("corpus")
            .launch(
                "reduce_shared",
                Dim3::x(blocks as u32),
                Dim3::x(bs),
                bs * 4,
                &[Arg::Buffer(&din), Arg::Buffer(&dout), Arg::I32(n as i32)],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        let got = floats(&dout);
        assert_eq!(
            got,
            reduce_shared_reference(&input, blocks, bs as usize),
            "block {bs}"
        );
        // And the total is the sum, within a relative 1e-5 (f32 rounding over the tree).
        let total: f64 = got.iter().map(|&x| x as f64).sum();
        let exact: f64 = input.iter().map(|&x| x as f64).sum();
        assert!(
            (total - exact).abs() <= 1e-5 * exact.abs(),
            "block {bs}: {total} against {exact}"
        );
    }
}

#[test]
fn shuffle_reduction_with_a_global_atomic_add_for_every_block_size() {
    let n = 5000usize;
    let input: Vec<i32> = xorshift(n, 25)
        .iter()
        .map(|&x| (x % 1000) as i32 - 500)
        .collect();
    let start = 7i32;
    let want = start + input.iter().sum::<i32>();
    for bs in BLOCKS {
        let din = buf(&to_bytes(&input, i32::to_le_bytes));
        // atomicAdd adds to what is there: start from 7, not 0.
        let dout = buf(&start.to_le_bytes());
        program("corpus")
            .launch(
                "reduce_shfl",
                Dim3::x(3),
                Dim3::x(bs),
                0,
                &[Arg::Buffer(&din), Arg::Buffer(&dout), Arg::I32(n as i32)],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        assert_eq!(words(&dout), [want as u32], "block {bs}");
    }
}

/// `carried_across_barriers`, computed the way the kernel's threads do it, one block at a time.
fn carried_reference(input: &[u32], bs: usize, rounds: i32) -> Vec<u32> {
    let mut out = Vec::with_capacity(input.len());
    for (b, block) in input.chunks(bs).enumerate() {
        let mut chosen: Vec<u32> = block
            .iter()
            .map(|&x| {
                if x & 1 == 1 {
                    x.wrapping_mul(3)
                } else {
                    x >> 1
                }
            })
            .collect();
        let trips: Vec<u32> = block
            .iter()
            .map(|&x| (0..x & 7).fold(0u32, |s, k| s.wrapping_add(k + bs as u32)))
            .collect();
        let mut acc = vec![0u32; bs];
        let mut stride = bs as u32;
        for r in 0..rounds {
            let words: Vec<u32> = chosen.iter().map(|c| c.wrapping_add(r as u32)).collect();
            for t in 0..bs {
                let j = (t as u32 + stride / 2 + r as u32) as usize % bs;
                acc[t] = acc[t].wrapping_add(words[j] ^ trips[t]);
                if r >= rounds / 2 {
                    acc[t] = acc[t].wrapping_add(chosen[t ^ 1]);
                }
            }
            for t in 0..bs {
                chosen[t] = chosen[t].wrapping_mul(2654435761).wrapping_add(acc[t]);
            }
            stride = stride / 2 + 1;
        }
        out.extend((0..bs).map(|t| acc[t] ^ chosen[t] ^ b as u32));
    }
    out
}

#[test]
fn per_thread_and_block_wide_values_carried_across_barriers_for_every_block_size() {
    for bs in BLOCKS {
        let blocks = 3u32;
        let n = (blocks * bs) as usize;
        let input = xorshift(n, 11 + bs);
        for rounds in [1, 2, 7] {
            let din = buf(&to_bytes(&input, u32::to_le_bytes));
            let dout = runtime().buffer(n * 4).expect("buffer");
            program("corpus")
                .launch(
                    "carried_across_barriers",
                    Dim3::x(blocks),
                    Dim3::x(bs),
                    bs * 4,
                    &[Arg::Buffer(&din), Arg::Buffer(&dout), Arg::I32(rounds)],
                )
                .unwrap_or_else(|e| panic!("block {bs}, {rounds} rounds: {e}"));
            assert_eq!(
                words(&dout),
                carried_reference(&input, bs as usize, rounds),
                "block {bs}, {rounds} rounds"
            );
        }
    }
}
