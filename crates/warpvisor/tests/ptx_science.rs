//! The numerical programs of the CUDA corpus on the CPU (`tests/ptx/src/science.cu` →
//! `ptx/science.ptx`): separable convolution, Black–Scholes, n-body, and Parboil-like CP, MRI-Q
//! and SAD, each against a Rust reference — exact where the arithmetic is the same, within the
//! stated tolerance where libm functions or f64 references are involved.

mod ptx_support;

use ptx_support::*;
use warpvisor::ptx::{Arg, Dim3};

/// `|a - b| <= tol * max(1, |b|)` for every element, or the first that is not.
fn close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    if let Some(i) =
        (0..got.len()).find(|&i| (got[i] - want[i]).abs() > tol * want[i].abs().max(1.0))
    {
        panic!(
            "{what}: element {i} is {}, expected {} (tolerance {tol})",
            got[i], want[i]
        );
    }
}

#[test]
fn separable_convolution_rows_then_columns() {
    let (w, h, radius) = (70usize, 45usize, 3i32);
    let img: Vec<f32> = xorshift(w * h, 11)
        .iter()
        .map(|&x| (x % 256) as f32)
        .collect();
    let k: Vec<f32> = [1.0f32, 4.0, 6.0, 8.0, 6.0, 4.0, 1.0]
        .iter()
        .map(|x| x / 30.0)
        .collect();
    let dk = buf(&to_bytes(&k, f32::to_le_bytes));
    let din = buf(&to_bytes(&img, f32::to_le_bytes));
    let mid = runtime().buffer(w * h * 4).expect("buffer");
    let out = runtime().buffer(w * h * 4).expect("buffer");
    let grid = Dim3::new((w as u32).div_ceil(16), (h as u32).div_ceil(16), 1);
    for (src, dst, rows) in [(&din, &mid, 1), (&mid, &out, 0)] {
        program("science")
            .launch(
                "convolve",
                grid,
                Dim3::new(16, 16, 1),
                0,
                &[
                    Arg::Buffer(src),
                    Arg::Buffer(dst),
                    Arg::Buffer(&dk),
                    Arg::I32(w as i32),
                    Arg::I32(h as i32),
                    Arg::I32(radius),
                    Arg::I32(rows),
                ],
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }
    // The same sums in the same order, each step one fused multiply-add (NVRTC's contraction).
    let pass = |src: &[f32], rows: bool| -> Vec<f32> {
        let mut o = vec![0f32; w * h];
        for y in 0..h as i32 {
            for x in 0..w as i32 {
                let mut s = 0f32;
                for d in -radius..=radius {
                    let (xx, yy) = if rows {
                        ((x + d).clamp(0, w as i32 - 1), y)
                    } else {
                        (x, (y + d).clamp(0, h as i32 - 1))
                    };
                    s = src[(yy * w as i32 + xx) as usize].mul_add(k[(d + radius) as usize], s);
                }
                o[(y * w as i32 + x) as usize] = s;
            }
        }
        o
    };
    let want = pass(&pass(&img, true), false);
    assert_eq!(floats(&out), want);
}

#[test]
fn black_scholes_for_every_block_size() {
    let n = 3000usize;
    let r = xorshift(3 * n, 12);
    let s: Vec<f32> = (0..n).map(|i| 5.0 + (r[i] % 2500) as f32 / 100.0).collect();
    let x: Vec<f32> = (0..n)
        .map(|i| 1.0 + (r[n + i] % 9900) as f32 / 100.0)
        .collect();
    let t: Vec<f32> = (0..n)
        .map(|i| 0.25 + (r[2 * n + i] % 975) as f32 / 100.0)
        .collect();
    let (rate, vol) = (0.02f32, 0.30f32);
    let cnd = |d: f64| {
        let k = 1.0 / (1.0 + 0.2316419 * d.abs());
        let c = 0.3989422804
            * (-0.5 * d * d).exp()
            * (k * (0.31938153
                + k * (-0.356563782 + k * (1.781477937 + k * (-1.821255978 + k * 1.330274429)))));
        if d > 0.0 {
            1.0 - c
        } else {
            c
        }
    };
    let (mut call_want, mut put_want) = (Vec::new(), Vec::new());
    for i in 0..n {
        let (s, x, t, r, v) = (
            s[i] as f64,
            x[i] as f64,
            t[i] as f64,
            rate as f64,
            vol as f64,
        );
        let d1 = ((s / x).ln() + (r + 0.5 * v * v) * t) / (v * t.sqrt());
        let d2 = d1 - v * t.sqrt();
        let e = (-r * t).exp();
        call_want.push((s * cnd(d1) - x * e * cnd(d2)) as f32);
        put_want.push((x * e * (1.0 - cnd(d2)) - s * (1.0 - cnd(d1))) as f32);
    }
    for bs in BLOCKS {
        let (ds, dx, dt) = (
            buf(&to_bytes(&s, f32::to_le_bytes)),
            buf(&to_bytes(&x, f32::to_le_bytes)),
            buf(&to_bytes(&t, f32::to_le_bytes)),
        );
        let (dc, dp) = (
            runtime().buffer(n * 4).expect("buffer"),
            runtime().buffer(n * 4).expect("buffer"),
        );
        program("science")
            .launch(
                "black_scholes",
                Dim3::x((n as u32).div_ceil(bs)),
                Dim3::x(bs),
                0,
                &[
                    Arg::Buffer(&ds),
                    Arg::Buffer(&dx),
                    Arg::Buffer(&dt),
                    Arg::Buffer(&dc),
                    Arg::Buffer(&dp),
                    Arg::F32(rate),
                    Arg::F32(vol),
                    Arg::I32(n as i32),
                ],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        // f32 arithmetic against an f64 reference: a relative 1e-3 (prices up to ~100).
        close(&floats(&dc), &call_want, 1e-3, &format!("call, block {bs}"));
        close(&floats(&dp), &put_want, 1e-3, &format!("put, block {bs}"));
    }
}

#[test]
fn nbody_accelerations_for_every_block_size() {
    let n = 700usize;
    let r = xorshift(4 * n, 13);
    let pos: Vec<f32> = (0..4 * n)
        .map(|i| {
            if i % 4 == 3 {
                1.0 + (r[i] % 10) as f32
            } else {
                (r[i] % 2000) as f32 / 100.0 - 10.0
            }
        })
        .collect();
    let eps2 = 0.01f32;
    let mut want = Vec::new();
    for i in 0..n {
        let (mut ax, mut ay, mut az) = (0f64, 0f64, 0f64);
        for j in 0..n {
            let d = [0, 1, 2].map(|c| pos[4 * j + c] as f64 - pos[4 * i + c] as f64);
            let inv = 1.0 / (d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + eps2 as f64).sqrt();
            let f = pos[4 * j + 3] as f64 * inv * inv * inv;
            ax += d[0] * f;
            ay += d[1] * f;
            az += d[2] * f;
        }
        want.extend([ax as f32, ay as f32, az as f32, 0.0]);
    }
    for bs in BLOCKS {
        let dp = buf(&to_bytes(&pos, f32::to_le_bytes));
        let da = runtime().buffer(n * 16).expect("buffer");
        program("science")
            .launch(
                "nbody",
                Dim3::x((n as u32).div_ceil(bs)),
                Dim3::x(bs),
                bs * 16,
                &[
                    Arg::Buffer(&dp),
                    Arg::Buffer(&da),
                    Arg::I32(n as i32),
                    Arg::F32(eps2),
                ],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        // Sums of 700 f32 terms of mixed sign against f64: an absolute 1e-2 on values ~1-100.
        let got = floats(&da);
        if let Some(i) =
            (0..got.len()).find(|&i| (got[i] - want[i]).abs() > 1e-2 + 1e-4 * want[i].abs())
        {
            panic!(
                "block {bs}: element {i} is {}, expected {}",
                got[i], want[i]
            );
        }
    }
}

#[test]
fn coulombic_potential_lattice() {
    let (w, h, natoms) = (40usize, 24usize, 50usize);
    let r = xorshift(4 * natoms, 14);
    let atoms: Vec<f32> = (0..4 * natoms)
        .map(|i| match i % 4 {
            2 => 1.0 + (r[i] % 100) as f32 / 50.0,
            3 => (r[i] % 200) as f32 / 100.0 - 1.0,
            _ => (r[i] % 400) as f32 / 10.0,
        })
        .collect();
    let spacing = 1.0f32;
    let da = buf(&to_bytes(&atoms, f32::to_le_bytes));
    let de = runtime().buffer(w * h * 4).expect("buffer");
    program("science")
        .launch(
            "cp_lattice",
            Dim3::new(3, 2, 1),
            Dim3::new(16, 16, 1),
            0,
            &[
                Arg::Buffer(&de),
                Arg::I32(w as i32),
                Arg::I32(h as i32),
                Arg::F32(spacing),
                Arg::Buffer(&da),
                Arg::I32(natoms as i32),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let mut want = vec![0f32; w * h];
    for y in 0..h {
        for x in 0..w {
            let mut e = 0f64;
            for a in atoms.chunks(4) {
                let (dx, dy, dz) = (x as f64 - a[0] as f64, y as f64 - a[1] as f64, a[2] as f64);
                e += a[3] as f64 / (dx * dx + dy * dy + dz * dz).sqrt();
            }
            want[y * w + x] = e as f32;
        }
    }
    close(&floats(&de), &want, 1e-4, "energy");
}

#[test]
fn mri_q_for_every_block_size() {
    let (num_k, num_x) = (64usize, 1500usize);
    let r = xorshift(4 * num_k + 3 * num_x, 15);
    let f = |v: u32| (v % 2000) as f32 / 1000.0 - 1.0;
    let (kx, ky, kz, phi): (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>) = (
        r[..num_k].iter().map(|&v| f(v)).collect(),
        r[num_k..2 * num_k].iter().map(|&v| f(v)).collect(),
        r[2 * num_k..3 * num_k].iter().map(|&v| f(v)).collect(),
        r[3 * num_k..4 * num_k]
            .iter()
            .map(|&v| f(v).abs())
            .collect(),
    );
    let base = 4 * num_k;
    let (x, y, z): (Vec<f32>, Vec<f32>, Vec<f32>) = (
        r[base..base + num_x].iter().map(|&v| f(v) * 4.0).collect(),
        r[base + num_x..base + 2 * num_x]
            .iter()
            .map(|&v| f(v) * 4.0)
            .collect(),
        r[base + 2 * num_x..base + 3 * num_x]
            .iter()
            .map(|&v| f(v) * 4.0)
            .collect(),
    );
    let (mut qr, mut qi) = (Vec::new(), Vec::new());
    for i in 0..num_x {
        let (mut a, mut b) = (0f64, 0f64);
        for k in 0..num_k {
            let arg = std::f64::consts::TAU
                * (kx[k] as f64 * x[i] as f64
                    + ky[k] as f64 * y[i] as f64
                    + kz[k] as f64 * z[i] as f64);
            a += phi[k] as f64 * arg.cos();
            b += phi[k] as f64 * arg.sin();
        }
        qr.push(a as f32);
        qi.push(b as f32);
    }
    let b = |v: &Vec<f32>| buf(&to_bytes(v, f32::to_le_bytes));
    for bs in BLOCKS {
        let (dkx, dky, dkz, dx, dy, dz, dphi) =
            (b(&kx), b(&ky), b(&kz), b(&x), b(&y), b(&z), b(&phi));
        let (dqr, dqi) = (
            runtime().buffer(num_x * 4).expect("buffer"),
            runtime().buffer(num_x * 4).expect("buffer"),
        );
        program("science")
            .launch(
                "mri_q",
                Dim3::x((num_x as u32).div_ceil(bs)),
                Dim3::x(bs),
                0,
                &[
                    Arg::I32(num_k as i32),
                    Arg::I32(num_x as i32),
                    Arg::Buffer(&dkx),
                    Arg::Buffer(&dky),
                    Arg::Buffer(&dkz),
                    Arg::Buffer(&dx),
                    Arg::Buffer(&dy),
                    Arg::Buffer(&dz),
                    Arg::Buffer(&dphi),
                    Arg::Buffer(&dqr),
                    Arg::Buffer(&dqi),
                ],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        // 64 terms with f32 arguments up to ~50 radians: an absolute 1e-3.
        for (got, want, what) in [(floats(&dqr), &qr, "Qr"), (floats(&dqi), &qi, "Qi")] {
            if let Some(i) = (0..num_x).find(|&i| (got[i] - want[i]).abs() > 1e-3) {
                panic!(
                    "{what}, block {bs}: element {i} is {}, expected {}",
                    got[i], want[i]
                );
            }
        }
    }
}

#[test]
fn sad_of_4x4_blocks_for_every_block_size() {
    let (w, h, range) = (32usize, 16usize, 4i32);
    let r = xorshift(2 * w * h, 16);
    let cur: Vec<u16> = r[..w * h].iter().map(|&v| (v % 1024) as u16).collect();
    let refr: Vec<u16> = r[w * h..].iter().map(|&v| (v % 1024) as u16).collect();
    let side = (2 * range + 1) as usize;
    let (bw, bh) = (w / 4, h / 4);
    let mut want = vec![0u32; bw * bh * side * side];
    for by in 0..bh {
        for bx in 0..bw {
            for d in 0..side * side {
                let (dx, dy) = ((d % side) as i32 - range, (d / side) as i32 - range);
                let mut s = 0u32;
                for j in 0..4 {
                    for i in 0..4 {
                        let (x, y) = ((bx * 4 + i) as i32, (by * 4 + j) as i32);
                        let (rx, ry) = (
                            (x + dx).clamp(0, w as i32 - 1),
                            (y + dy).clamp(0, h as i32 - 1),
                        );
                        s += (cur[(y * w as i32 + x) as usize] as i32
                            - refr[(ry * w as i32 + rx) as usize] as i32)
                            .unsigned_abs();
                    }
                }
                want[(by * bw + bx) * side * side + d] = s;
            }
        }
    }
    let halves = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    for bs in BLOCKS {
        let (dc, dr) = (buf(&halves(&cur)), buf(&halves(&refr)));
        let out = runtime().buffer(want.len() * 4).expect("buffer");
        program("science")
            .launch(
                "sad_4x4",
                Dim3::new(bw as u32, bh as u32, 1),
                Dim3::x(bs),
                0,
                &[
                    Arg::Buffer(&dc),
                    Arg::Buffer(&dr),
                    Arg::Buffer(&out),
                    Arg::I32(w as i32),
                    Arg::I32(h as i32),
                    Arg::I32(range),
                ],
            )
            .unwrap_or_else(|e| panic!("block {bs}: {e}"));
        assert_eq!(words(&out), want, "block {bs}");
    }
}
