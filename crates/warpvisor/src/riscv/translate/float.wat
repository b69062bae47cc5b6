
  ;; ---- F and D: canonical NaNs, min/max, classes, fused multiply-add, conversions ----

  ;; A register's single (NaN-boxed; an improperly boxed value reads as the canonical NaN).
  (func $fs (param $v i64) (result f32)
    (f32.reinterpret_i32 (i32.wrap_i64 (call $unbox (local.get $v)))))
  ;; Results as register bits: any NaN becomes RISC-V's canonical NaN.
  (func $cd (param $x f64) (result i64)
    (select (i64.const 0x7ff8000000000000) (i64.reinterpret_f64 (local.get $x))
      (f64.ne (local.get $x) (local.get $x))))
  (func $cs (param $x f32) (result i64)
    (i64.or (i64.const 0xffffffff00000000)
      (i64.extend_i32_u (select (i32.const 0x7fc00000) (i32.reinterpret_f32 (local.get $x))
        (f32.ne (local.get $x) (local.get $x))))))

  ;; fmin/fmax: a NaN operand yields the other; two NaNs the canonical NaN; -0 < +0.
  (func $fmin_d (param $a i64) (param $b i64) (result i64)
    (local $x f64) (local $y f64)
    (local.set $x (f64.reinterpret_i64 (local.get $a)))
    (local.set $y (f64.reinterpret_i64 (local.get $b)))
    (if (f64.ne (local.get $x) (local.get $x)) (then (return (call $cd (local.get $y)))))
    (if (f64.ne (local.get $y) (local.get $y)) (then (return (local.get $a))))
    (if (f64.eq (local.get $x) (local.get $y)) (then (return (i64.or (local.get $a) (local.get $b)))))
    (i64.reinterpret_f64 (f64.min (local.get $x) (local.get $y))))
  (func $fmax_d (param $a i64) (param $b i64) (result i64)
    (local $x f64) (local $y f64)
    (local.set $x (f64.reinterpret_i64 (local.get $a)))
    (local.set $y (f64.reinterpret_i64 (local.get $b)))
    (if (f64.ne (local.get $x) (local.get $x)) (then (return (call $cd (local.get $y)))))
    (if (f64.ne (local.get $y) (local.get $y)) (then (return (local.get $a))))
    (if (f64.eq (local.get $x) (local.get $y)) (then (return (i64.and (local.get $a) (local.get $b)))))
    (i64.reinterpret_f64 (f64.max (local.get $x) (local.get $y))))
  (func $fmin_s (param $a i64) (param $b i64) (result i64)
    (local $x f32) (local $y f32)
    (local.set $x (call $fs (local.get $a)))
    (local.set $y (call $fs (local.get $b)))
    (if (f32.ne (local.get $x) (local.get $x)) (then (return (call $cs (local.get $y)))))
    (if (f32.ne (local.get $y) (local.get $y)) (then (return (call $cs (local.get $x)))))
    (if (f32.eq (local.get $x) (local.get $y)) (then (return (i64.or (i64.const 0xffffffff00000000)
      (i64.extend_i32_u (i32.or (i32.reinterpret_f32 (local.get $x)) (i32.reinterpret_f32 (local.get $y))))))))
    (call $cs (f32.min (local.get $x) (local.get $y))))
  (func $fmax_s (param $a i64) (param $b i64) (result i64)
    (local $x f32) (local $y f32)
    (local.set $x (call $fs (local.get $a)))
    (local.set $y (call $fs (local.get $b)))
    (if (f32.ne (local.get $x) (local.get $x)) (then (return (call $cs (local.get $y)))))
    (if (f32.ne (local.get $y) (local.get $y)) (then (return (call $cs (local.get $x)))))
    (if (f32.eq (local.get $x) (local.get $y)) (then (return (i64.or (i64.const 0xffffffff00000000)
      (i64.extend_i32_u (i32.and (i32.reinterpret_f32 (local.get $x)) (i32.reinterpret_f32 (local.get $y))))))))
    (call $cs (f32.max (local.get $x) (local.get $y))))

  ;; fclass: one bit of ten (-inf, -normal, -subnormal, -0, +0, +subnormal, +normal, +inf,
  ;; signaling NaN, quiet NaN) from sign, exponent and fraction.
  (func $fclass (param $neg i32) (param $exp_all i32) (param $exp_zero i32) (param $frac_zero i32) (param $quiet i32) (result i64)
    (if (local.get $exp_all) (then
      (if (local.get $frac_zero) (then (return (select (i64.const 1) (i64.const 128) (local.get $neg)))))
      (return (select (i64.const 512) (i64.const 256) (local.get $quiet)))))
    (if (local.get $exp_zero) (then
      (if (local.get $frac_zero) (then (return (select (i64.const 8) (i64.const 16) (local.get $neg)))))
      (return (select (i64.const 4) (i64.const 32) (local.get $neg)))))
    (select (i64.const 2) (i64.const 64) (local.get $neg)))
  (func $fclass_d (param $v i64) (result i64)
    (local $e i64)
    (local.set $e (i64.and (i64.shr_u (local.get $v) (i64.const 52)) (i64.const 0x7ff)))
    (call $fclass (i64.lt_s (local.get $v) (i64.const 0)) (i64.eq (local.get $e) (i64.const 0x7ff))
      (i64.eqz (local.get $e)) (i64.eqz (i64.and (local.get $v) (i64.const 0xfffffffffffff)))
      (i64.ne (i64.and (local.get $v) (i64.const 0x8000000000000)) (i64.const 0))))
  (func $fclass_s (param $r i64) (result i64)
    (local $v i32) (local $e i32)
    (local.set $v (i32.wrap_i64 (call $unbox (local.get $r))))
    (local.set $e (i32.and (i32.shr_u (local.get $v) (i32.const 23)) (i32.const 0xff)))
    (call $fclass (i32.lt_s (local.get $v) (i32.const 0)) (i32.eq (local.get $e) (i32.const 0xff))
      (i32.eqz (local.get $e)) (i32.eqz (i32.and (local.get $v) (i32.const 0x7fffff)))
      (i32.ne (i32.and (local.get $v) (i32.const 0x400000)) (i32.const 0))))

  ;; a + b rounded to odd: the nearest-even sum, moved one unit toward the exact sum when it
  ;; is inexact and even (Boldo and Melquiond's emulation of FMA needs it).
  (func $add_odd (param $a f64) (param $b f64) (result f64)
    (local $s f64) (local $bb f64) (local $e f64) (local $bits i64)
    (local.set $s (f64.add (local.get $a) (local.get $b)))
    (local.set $bb (f64.sub (local.get $s) (local.get $a)))
    (local.set $e (f64.add (f64.sub (local.get $a) (f64.sub (local.get $s) (local.get $bb)))
                           (f64.sub (local.get $b) (local.get $bb))))
    (local.set $bits (i64.reinterpret_f64 (local.get $s)))
    (if (i32.and (i32.and (f64.ne (local.get $e) (f64.const 0)) (f64.lt (f64.abs (local.get $s)) (f64.const inf)))
                 (i64.eqz (i64.and (local.get $bits) (i64.const 1))))
      (then (local.set $bits (i64.add (local.get $bits)
        (select (i64.const 1) (i64.const -1)
          (i32.eq (f64.lt (local.get $e) (f64.const 0)) (f64.lt (local.get $s) (f64.const 0))))))))
    (f64.reinterpret_i64 (local.get $bits)))

  ;; Fused a*b + c, rounded once: the exact product as a sum of two doubles (Dekker), the
  ;; exact sum with c (TwoSum), the low parts added rounded to odd, then one rounding
  ;; (Boldo and Melquiond). A tiny product is computed with its smaller factor scaled up by
  ;; 2^200 (scaling back rounds to the subnormal grid; a tie that rounding makes is broken by
  ;; the sign of the residual). Infinities, NaNs, zeros (a zero c: the product alone, rounded
  ;; once) and products beyond 2^995 take the plain path (docs/riscv.md).
  (func $fma_d (param $a f64) (param $b f64) (param $c f64) (result f64)
    (local $ph f64) (local $r f64) (local $z f64) (local $d f64)
    (local.set $ph (f64.mul (local.get $a) (local.get $b)))
    (if (i32.or (i32.or
          (i32.eqz (f64.lt (f64.abs (local.get $ph)) (f64.const 0x1p+995)))
          (i32.eqz (f64.lt (f64.abs (local.get $c)) (f64.const inf))))
          (i32.or (i32.or (i32.or (f64.eq (local.get $a) (f64.const 0)) (f64.eq (local.get $b) (f64.const 0)))
                          (f64.eq (local.get $c) (f64.const 0)))
                  (i32.or (i32.eqz (f64.lt (f64.abs (local.get $a)) (f64.const 0x1p+995)))
                          (i32.eqz (f64.lt (f64.abs (local.get $b)) (f64.const 0x1p+995))))))
      (then (return (f64.add (local.get $ph) (local.get $c)))))
    (if (f64.lt (f64.abs (local.get $ph)) (f64.const 0x1p-900)) (then
      ;; The exact product is below half an ulp of any c but zero.
      (if (f64.eq (local.get $ph) (f64.const 0)) (then
        (return (select (local.get $c) (local.get $ph) (f64.ne (local.get $c) (f64.const 0))))))
      ;; c dwarfs the product: the sum rounds to c.
      (if (f64.ge (f64.abs (local.get $c)) (f64.const 0x1p+800)) (then (return (local.get $c))))
      ;; Scale the smaller factor, so that the split of neither is subnormal.
      (if (f64.lt (f64.abs (local.get $a)) (f64.abs (local.get $b)))
        (then (local.set $a (f64.mul (local.get $a) (f64.const 0x1p+200))))
        (else (local.set $b (f64.mul (local.get $b) (f64.const 0x1p+200)))))
      (local.set $c (f64.mul (local.get $c) (f64.const 0x1p+200)))
      ;; The nearest double to the scaled result, then scaled back: one more rounding, to the
      ;; subnormal grid, which is right unless it breaks a tie the exact result does not
      ;; have; then the residual's sign picks the neighbour.
      (local.set $r (call $fma_core (local.get $a) (local.get $b) (local.get $c) (i32.const 0)))
      (local.set $z (f64.mul (local.get $r) (f64.const 0x1p-200)))
      (local.set $d (f64.sub (local.get $r) (f64.mul (local.get $z) (f64.const 0x1p+200))))
      (if (i32.and (f64.eq (f64.abs (local.get $d)) (f64.const 0x1p-875))
                   (f64.ne (global.get $fma_residual) (f64.const 0)))
        (then (return (f64.mul (select
          (f64.add (f64.mul (local.get $z) (f64.const 0x1p+200)) (f64.mul (local.get $d) (f64.const 2)))
          (f64.mul (local.get $z) (f64.const 0x1p+200))
          (i32.eq (f64.gt (global.get $fma_residual) (f64.const 0)) (f64.gt (local.get $d) (f64.const 0))))
          (f64.const 0x1p-200)))))
      (return (local.get $z))))
    (call $fma_core (local.get $a) (local.get $b) (local.get $c) (i32.const 0)))
  ;; The emulated FMA of finite, non-zero a and b whose product is normal and below 2^995:
  ;; rounded to nearest-even (the sign of what that left out in $fma_residual), or to odd.
  (func $fma_core (param $a f64) (param $b f64) (param $c f64) (param $odd i32) (result f64)
    (local $ph f64) (local $pl f64) (local $t f64) (local $ah f64) (local $al f64) (local $bh f64) (local $bl f64)
    (local $uh f64) (local $ul f64) (local $bb f64) (local $lo f64) (local $r f64) (local $e1 f64) (local $s f64)
    (local.set $ph (f64.mul (local.get $a) (local.get $b)))
    (local.set $t (f64.mul (local.get $a) (f64.const 134217729)))
    (local.set $ah (f64.sub (local.get $t) (f64.sub (local.get $t) (local.get $a))))
    (local.set $al (f64.sub (local.get $a) (local.get $ah)))
    (local.set $t (f64.mul (local.get $b) (f64.const 134217729)))
    (local.set $bh (f64.sub (local.get $t) (f64.sub (local.get $t) (local.get $b))))
    (local.set $bl (f64.sub (local.get $b) (local.get $bh)))
    (local.set $pl (f64.add (f64.add (f64.add
      (f64.sub (f64.mul (local.get $ah) (local.get $bh)) (local.get $ph))
      (f64.mul (local.get $ah) (local.get $bl)))
      (f64.mul (local.get $al) (local.get $bh)))
      (f64.mul (local.get $al) (local.get $bl))))
    (local.set $uh (f64.add (local.get $c) (local.get $ph)))
    (local.set $bb (f64.sub (local.get $uh) (local.get $c)))
    (local.set $ul (f64.add (f64.sub (local.get $c) (f64.sub (local.get $uh) (local.get $bb)))
                            (f64.sub (local.get $ph) (local.get $bb))))
    (local.set $lo (call $add_odd (local.get $pl) (local.get $ul)))
    (if (local.get $odd) (then (return (call $add_odd (local.get $uh) (local.get $lo)))))
    (local.set $r (f64.add (local.get $uh) (local.get $lo)))
    ;; The exact result minus $r, by its sign: the error of that last sum, or when it has none,
    ;; what rounding the low parts to odd left out.
    (local.set $bb (f64.sub (local.get $r) (local.get $uh)))
    (local.set $e1 (f64.add (f64.sub (local.get $uh) (f64.sub (local.get $r) (local.get $bb)))
                            (f64.sub (local.get $lo) (local.get $bb))))
    (if (f64.ne (local.get $e1) (f64.const 0))
      (then (global.set $fma_residual (local.get $e1)))
      (else
        (local.set $s (f64.add (local.get $pl) (local.get $ul)))
        (local.set $bb (f64.sub (local.get $s) (local.get $pl)))
        (local.set $e1 (f64.add (f64.sub (local.get $pl) (f64.sub (local.get $s) (local.get $bb)))
                                (f64.sub (local.get $ul) (local.get $bb))))
        (global.set $fma_residual (select (local.get $e1) (f64.neg (local.get $e1))
          (f64.eq (local.get $lo) (local.get $s))))))
    (local.get $r))
  (global $fma_residual (mut f64) (f64.const 0))
  ;; Singles: the product is exact in a double; the sum rounded to odd there, then to single.
  (func $fma_s (param $a f32) (param $b f32) (param $c f32) (result f32)
    (f32.demote_f64 (call $add_odd
      (f64.mul (f64.promote_f32 (local.get $a)) (f64.promote_f32 (local.get $b)))
      (f64.promote_f32 (local.get $c)))))

  ;; Float → integer (kind 0 w, 1 wu, 2 l, 3 lu) in rounding mode $rm (7: frm): RISC-V
  ;; saturates, a NaN gives the largest value, and 32-bit results are sign-extended.
  (func $fcvt_int (param $x f64) (param $kind i32) (param $rm i32) (param $pc i64) (result i64)
    (local $r f64) (local $t f64)
    (if (i32.eq (local.get $rm) (i32.const 7))
      (then (local.set $rm (i32.wrap_i64 (i64.and (i64.shr_u (global.get $fcsr) (i64.const 5)) (i64.const 7))))))
    (if (f64.ne (local.get $x) (local.get $x)) (then
      (call $raise (i32.const 16))
      (if (i32.eqz (local.get $kind)) (then (return (i64.const 0x7fffffff))))
      (if (i32.eq (local.get $kind) (i32.const 2)) (then (return (i64.const 0x7fffffffffffffff))))
      (return (i64.const -1))))
    (local.set $r (local.get $x))
    (block $done
      (if (i32.eqz (local.get $rm)) (then (local.set $r (f64.nearest (local.get $x))) (br $done)))
      (if (i32.eq (local.get $rm) (i32.const 1)) (then (local.set $r (f64.trunc (local.get $x))) (br $done)))
      (if (i32.eq (local.get $rm) (i32.const 2)) (then (local.set $r (f64.floor (local.get $x))) (br $done)))
      (if (i32.eq (local.get $rm) (i32.const 3)) (then (local.set $r (f64.ceil (local.get $x))) (br $done)))
      (if (i32.eq (local.get $rm) (i32.const 4)) (then
        ;; to nearest, ties away from zero
        (local.set $t (f64.trunc (local.get $x)))
        (local.set $r (select (f64.add (local.get $t) (f64.copysign (f64.const 1) (local.get $x))) (local.get $t)
          (f64.ge (f64.abs (f64.sub (local.get $x) (local.get $t))) (f64.const 0.5))))
        (br $done)))
      (call $illegal (local.get $pc)))
    ;; Flags: invalid beyond the kind's range, else inexact when rounding moved the value.
    (if (if (result i32) (i32.eqz (local.get $kind))
          (then (i32.or (f64.lt (local.get $r) (f64.const -0x1p31)) (f64.gt (local.get $r) (f64.const 0x1.fffffffcp30))))
          (else (if (result i32) (i32.eq (local.get $kind) (i32.const 1))
            (then (i32.or (f64.lt (local.get $r) (f64.const 0)) (f64.gt (local.get $r) (f64.const 0x1.fffffffep31))))
            (else (if (result i32) (i32.eq (local.get $kind) (i32.const 2))
              (then (i32.or (f64.lt (local.get $r) (f64.const -0x1p63)) (f64.ge (local.get $r) (f64.const 0x1p63))))
              (else (i32.or (f64.lt (local.get $r) (f64.const 0)) (f64.ge (local.get $r) (f64.const 0x1p64)))))))))
      (then (call $raise (i32.const 16)))
      (else (if (f64.ne (local.get $r) (local.get $x)) (then (call $raise (i32.const 1))))))
    (if (i32.eqz (local.get $kind)) (then (return (i64.extend_i32_s (i32.trunc_sat_f64_s (local.get $r))))))
    (if (i32.eq (local.get $kind) (i32.const 1)) (then (return (i64.extend_i32_s (i32.trunc_sat_f64_u (local.get $r))))))
    (if (i32.eq (local.get $kind) (i32.const 2)) (then (return (i64.trunc_sat_f64_s (local.get $r)))))
    (i64.trunc_sat_f64_u (local.get $r)))
