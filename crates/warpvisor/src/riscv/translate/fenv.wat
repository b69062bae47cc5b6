
  ;; ---- The floating-point environment: fflags and the five rounding modes ----
  ;; Used by programs that read fflags/fcsr or round other than to nearest-even (float.rs
  ;; decides per module). Each rounding operation computes its exact result as hi + lo, scaled
  ;; by 2^-s (lo: hi's exact error, or for quotients and square roots a stand-in of its sign),
  ;; then $fenv_round rounds that once, in the mode, to the format. Flags: NX 1, UF 2, OF 4,
  ;; DZ 8, NV 16. Modes: 0 RNE, 1 RTZ, 2 RDN, 3 RUP, 4 RMM.

  (func $raise (param $f i32)
    (global.set $fcsr (i64.or (global.get $fcsr) (i64.extend_i32_u (local.get $f)))))

  ;; The mode of an instruction's rm field (7: frm); a reserved one is an illegal instruction.
  (func $rmode (param $rm i32) (param $pc i64) (result i32)
    (if (i32.eq (local.get $rm) (i32.const 7))
      (then (local.set $rm (i32.wrap_i64 (i64.and (i64.shr_u (global.get $fcsr) (i64.const 5)) (i64.const 7))))))
    (if (i32.gt_u (local.get $rm) (i32.const 4)) (then (call $illegal (local.get $pc))))
    (local.get $rm))

  ;; 2^k for k in -1074..1023.
  (func $pow2 (param $k i32) (result f64)
    (if (result f64) (i32.lt_s (local.get $k) (i32.const -1022))
      (then (f64.reinterpret_i64 (i64.shl (i64.const 1) (i64.extend_i32_u (i32.add (local.get $k) (i32.const 1074))))))
      (else (f64.reinterpret_i64 (i64.shl (i64.extend_i32_u (i32.add (local.get $k) (i32.const 1023))) (i64.const 52))))))
  ;; x * 2^k for any k: steps that stay in range, so only the last one can round.
  (func $scale (param $x f64) (param $k i32) (result f64)
    (block $done (loop $more
      (br_if $done (i32.and (i32.ge_s (local.get $k) (i32.const -1000)) (i32.le_s (local.get $k) (i32.const 1000))))
      (if (i32.gt_s (local.get $k) (i32.const 0))
        (then (local.set $x (f64.mul (local.get $x) (f64.const 0x1p1000))) (local.set $k (i32.sub (local.get $k) (i32.const 1000))))
        (else (local.set $x (f64.mul (local.get $x) (f64.const 0x1p-1000))) (local.set $k (i32.add (local.get $k) (i32.const 1000)))))
      (br $more)))
    (f64.mul (local.get $x) (call $pow2 (local.get $k))))

  ;; x (finite, non-zero) as m * 2^$fenv_exp with |m| in [1, 2), m keeping x's sign.
  (global $fenv_exp (mut i32) (i32.const 0))
  (func $fenv_norm (param $x f64) (result f64)
    (local $b i64) (local $adj i32)
    (if (f64.lt (f64.abs (local.get $x)) (f64.const 0x1p-1022)) (then
      (local.set $x (f64.mul (local.get $x) (f64.const 0x1p64))) (local.set $adj (i32.const 64))))
    (local.set $b (i64.reinterpret_f64 (local.get $x)))
    (global.set $fenv_exp (i32.sub (i32.sub (i32.wrap_i64 (i64.and (i64.shr_u (local.get $b) (i64.const 52)) (i64.const 0x7ff))) (i32.const 1023)) (local.get $adj)))
    (f64.reinterpret_i64 (i64.or (i64.and (local.get $b) (i64.const 0x800fffffffffffff)) (i64.const 0x3ff0000000000000))))

  ;; a + b, the exact error in $fenv_lo (TwoSum).
  (global $fenv_lo (mut f64) (f64.const 0))
  (func $two_sum (param $a f64) (param $b f64) (result f64)
    (local $s f64) (local $bb f64)
    (local.set $s (f64.add (local.get $a) (local.get $b)))
    (local.set $bb (f64.sub (local.get $s) (local.get $a)))
    (global.set $fenv_lo (f64.add (f64.sub (local.get $a) (f64.sub (local.get $s) (local.get $bb)))
                                  (f64.sub (local.get $b) (local.get $bb))))
    (local.get $s))
  ;; a * b (normal, product in range), the exact error in $fenv_lo (Dekker).
  (func $two_prod (param $a f64) (param $b f64) (result f64)
    (local $p f64) (local $t f64) (local $ah f64) (local $al f64) (local $bh f64) (local $bl f64)
    (local.set $p (f64.mul (local.get $a) (local.get $b)))
    (local.set $t (f64.mul (local.get $a) (f64.const 134217729)))
    (local.set $ah (f64.sub (local.get $t) (f64.sub (local.get $t) (local.get $a))))
    (local.set $al (f64.sub (local.get $a) (local.get $ah)))
    (local.set $t (f64.mul (local.get $b) (f64.const 134217729)))
    (local.set $bh (f64.sub (local.get $t) (f64.sub (local.get $t) (local.get $b))))
    (local.set $bl (f64.sub (local.get $b) (local.get $bh)))
    (global.set $fenv_lo (f64.add (f64.add (f64.add
      (f64.sub (f64.mul (local.get $ah) (local.get $bh)) (local.get $p))
      (f64.mul (local.get $ah) (local.get $bl)))
      (f64.mul (local.get $al) (local.get $bh)))
      (f64.mul (local.get $al) (local.get $bl))))
    (local.get $p))

  ;; |hi + lo| (hi > 0; |lo| at most half an ulp of hi) rounded to a multiple of $q (a power of
  ;; two, at least an ulp of hi) in mode $m, for a value of sign $neg; $fenv_inexact says
  ;; whether it moved. The fraction beyond the multiple below is classed: 0 none, 1 below a
  ;; half, 2 a half, 3 above.
  (global $fenv_inexact (mut i32) (i32.const 0))
  (func $round_grid (param $hi f64) (param $lo f64) (param $q f64) (param $neg i32) (param $m i32) (result f64)
    (local $n f64) (local $f f64) (local $below f64) (local $half f64) (local $cls i32) (local $up i32)
    (local.set $n (f64.div (local.get $hi) (local.get $q)))
    (local.set $below (f64.trunc (local.get $n)))
    (local.set $f (f64.sub (local.get $n) (local.get $below)))
    (local.set $half (f64.mul (local.get $q) (f64.const 0.5)))
    (if (f64.eq (local.get $f) (f64.const 0))
      (then
        (if (f64.gt (local.get $lo) (f64.const 0))
          (then (local.set $cls (select (i32.const 2) (i32.const 1) (f64.eq (local.get $lo) (local.get $half))))))
        (if (f64.lt (local.get $lo) (f64.const 0)) (then
          (local.set $below (f64.sub (local.get $below) (f64.const 1)))
          (local.set $cls (select (i32.const 2) (i32.const 3) (f64.eq (f64.neg (local.get $lo)) (local.get $half)))))))
      (else
        (local.set $cls (select (i32.const 1) (i32.const 3) (f64.lt (local.get $f) (f64.const 0.5))))
        (if (f64.eq (local.get $f) (f64.const 0.5)) (then
          (local.set $cls (select (i32.const 3)
            (select (i32.const 1) (i32.const 2) (f64.lt (local.get $lo) (f64.const 0)))
            (f64.gt (local.get $lo) (f64.const 0))))))))
    (global.set $fenv_inexact (i32.ne (local.get $cls) (i32.const 0)))
    (block $decided
      ;; to nearest, ties to even
      (if (i32.eqz (local.get $m)) (then
        (local.set $up (i32.or (i32.eq (local.get $cls) (i32.const 3))
          (i32.and (i32.eq (local.get $cls) (i32.const 2))
            (f64.ne (f64.floor (f64.mul (local.get $below) (f64.const 0.5))) (f64.mul (local.get $below) (f64.const 0.5))))))
        (br $decided)))
      ;; to nearest, ties away from zero
      (if (i32.eq (local.get $m) (i32.const 4)) (then (local.set $up (i32.ge_u (local.get $cls) (i32.const 2))) (br $decided)))
      ;; down, up (towards zero: never)
      (if (i32.eq (local.get $m) (i32.const 2)) (then (local.set $up (i32.and (local.get $neg) (i32.ne (local.get $cls) (i32.const 0)))) (br $decided)))
      (if (i32.eq (local.get $m) (i32.const 3)) (then (local.set $up (i32.and (i32.eqz (local.get $neg)) (i32.ne (local.get $cls) (i32.const 0)))))))
    (f64.mul (f64.add (local.get $below) (f64.convert_i32_u (local.get $up))) (local.get $q)))

  ;; (hi + lo) * 2^-s rounded in mode $m to a double ($single 0) or a single (1), raising NX,
  ;; UF (tiny after rounding) and OF; hi finite and non-zero.
  (func $fenv_round (param $hi f64) (param $lo f64) (param $s i32) (param $single i32) (param $m i32) (result f64)
    (local $neg i32) (local $e i32) (local $p i32) (local $emin i32) (local $emax i32)
    (local $r f64) (local $max f64) (local $inexact i32) (local $ru f64)
    (local.set $neg (f64.lt (local.get $hi) (f64.const 0)))
    (local.set $hi (f64.abs (local.get $hi)))
    (if (local.get $neg) (then (local.set $lo (f64.neg (local.get $lo)))))
    ;; A subnormal hi: scaled up, exactly, with lo.
    (if (f64.lt (local.get $hi) (f64.const 0x1p-1022)) (then
      (local.set $hi (f64.mul (local.get $hi) (f64.const 0x1p128)))
      (local.set $lo (f64.mul (local.get $lo) (f64.const 0x1p128)))
      (local.set $s (i32.add (local.get $s) (i32.const 128)))))
    (local.set $p (select (i32.const 24) (i32.const 53) (local.get $single)))
    (local.set $emin (select (i32.const -126) (i32.const -1022) (local.get $single)))
    (local.set $emax (select (i32.const 127) (i32.const 1023) (local.get $single)))
    ;; The exponent of hi + lo: hi's, one less when hi is a power of two and lo points below.
    (local.set $e (i32.sub (i32.sub (i32.wrap_i64 (i64.shr_u (i64.reinterpret_f64 (local.get $hi)) (i64.const 52))) (i32.const 1023)) (local.get $s)))
    (if (i32.and (i64.eqz (i64.and (i64.reinterpret_f64 (local.get $hi)) (i64.const 0xfffffffffffff)))
                 (f64.lt (local.get $lo) (f64.const 0)))
      (then (local.set $e (i32.sub (local.get $e) (i32.const 1)))))
    ;; Far below the smallest subnormal or far above the largest number: a stand-in that
    ;; rounds alike (1.5 * 2^e, inexact in the same direction).
    (if (i32.lt_s (local.get $e) (i32.sub (i32.sub (local.get $emin) (local.get $p)) (i32.const 2))) (then
      (local.set $e (i32.sub (i32.sub (local.get $emin) (local.get $p)) (i32.const 3)))
      (local.set $hi (f64.const 1.5)) (local.set $lo (f64.const 0)) (local.set $s (i32.sub (i32.const 0) (local.get $e)))))
    (if (i32.gt_s (local.get $e) (i32.add (local.get $emax) (i32.const 2))) (then
      (local.set $e (i32.add (local.get $emax) (i32.const 2)))
      (local.set $hi (f64.const 1.5)) (local.set $lo (f64.const 0)) (local.set $s (i32.sub (i32.const 0) (local.get $e)))))
    ;; The format's spacing at that exponent (the subnormal spacing below emin).
    (local.set $r (call $round_grid (local.get $hi) (local.get $lo)
      (call $pow2 (i32.add (i32.sub (i32.add
        (select (local.get $e) (local.get $emin) (i32.ge_s (local.get $e) (local.get $emin)))
        (i32.const 1)) (local.get $p)) (local.get $s)))
      (local.get $neg) (local.get $m)))
    (local.set $inexact (global.get $fenv_inexact))
    (local.set $r (call $scale (local.get $r) (i32.sub (i32.const 0) (local.get $s))))
    (local.set $max (select (f64.const 0x1.fffffep127) (f64.const 0x1.fffffffffffffp1023) (local.get $single)))
    (if (f64.gt (local.get $r) (local.get $max)) (then
      (call $raise (i32.const 5))
      ;; Overflow: infinity to nearest, the largest number towards zero, by sign otherwise.
      (local.set $r (select (local.get $max) (f64.const inf)
        (i32.or (i32.eq (local.get $m) (i32.const 1))
          (i32.or (i32.and (i32.eq (local.get $m) (i32.const 2)) (i32.eqz (local.get $neg)))
                  (i32.and (i32.eq (local.get $m) (i32.const 3)) (local.get $neg))))))
      (return (select (f64.neg (local.get $r)) (local.get $r) (local.get $neg)))))
    (if (local.get $inexact) (then
      (call $raise (i32.const 1))
      ;; Tiny: rounded with an unbounded exponent, still below 2^emin (compared in the
      ;; scaled domain: that rounding need not be representable).
      (if (i32.lt_s (local.get $e) (local.get $emin)) (then
        (local.set $ru (call $round_grid (local.get $hi) (local.get $lo)
          (call $pow2 (i32.add (i32.sub (i32.add (local.get $e) (i32.const 1)) (local.get $p)) (local.get $s)))
          (local.get $neg) (local.get $m)))
        (if (f64.lt (local.get $ru) (call $pow2 (i32.add (local.get $emin) (local.get $s))))
          (then (call $raise (i32.const 2))))))))
    (select (f64.neg (local.get $r)) (local.get $r) (local.get $neg)))

  ;; A register's value (a single unboxed and widened exactly; NaNs stay NaNs).
  (func $fenv_val (param $x i64) (param $single i32) (result f64)
    (if (result f64) (local.get $single)
      (then (f64.promote_f32 (f32.reinterpret_i32 (i32.wrap_i64 (call $unbox (local.get $x))))))
      (else (f64.reinterpret_i64 (local.get $x)))))
  ;; Whether a register holds a signaling NaN.
  (func $fenv_snan (param $x i64) (param $single i32) (result i32)
    (if (result i32) (local.get $single)
      (then
        (local.set $x (call $unbox (local.get $x)))
        (i32.and (i64.eq (i64.and (local.get $x) (i64.const 0x7fc00000)) (i64.const 0x7f800000))
                 (i64.ne (i64.and (local.get $x) (i64.const 0x3fffff)) (i64.const 0))))
      (else
        (i32.and (i64.eq (i64.and (local.get $x) (i64.const 0x7ff8000000000000)) (i64.const 0x7ff0000000000000))
                 (i64.ne (i64.and (local.get $x) (i64.const 0x7ffffffffffff)) (i64.const 0))))))
  ;; A result as register bits: NaNs canonical, singles NaN-boxed (r is a single's value).
  (func $fenv_bits (param $r f64) (param $single i32) (result i64)
    (if (result i64) (local.get $single)
      (then (call $cs (f32.demote_f64 (local.get $r))))
      (else (call $cd (local.get $r)))))
  ;; The zero an exact cancellation gives: -0 rounding down, else +0.
  (func $fenv_zero (param $m i32) (result f64)
    (select (f64.const -0) (f64.const 0) (i32.eq (local.get $m) (i32.const 2))))

  ;; a + b.
  (func $fenv_add (param $a f64) (param $b f64) (param $single i32) (param $m i32) (result f64)
    (local $s f64) (local $k i32)
    (if (i32.or (f64.ne (local.get $a) (local.get $a)) (f64.ne (local.get $b) (local.get $b)))
      (then (return (f64.const nan))))
    (if (i32.or (f64.eq (f64.abs (local.get $a)) (f64.const inf)) (f64.eq (f64.abs (local.get $b)) (f64.const inf))) (then
      (local.set $s (f64.add (local.get $a) (local.get $b)))
      (if (f64.ne (local.get $s) (local.get $s)) (then (call $raise (i32.const 16))))
      (return (local.get $s))))
    ;; Near the top of the range TwoSum's own steps would overflow: both operands scaled by
    ;; 1/4 (a tiny partner, which that would round, only decides a direction: a stand-in).
    (if (f64.ge (f64.max (f64.abs (local.get $a)) (f64.abs (local.get $b))) (f64.const 0x1p1021)) (then
      (local.set $a (select (f64.mul (local.get $a) (f64.const 0.25)) (f64.copysign (f64.const 0x1p-1000) (local.get $a))
        (i32.or (f64.ge (f64.abs (local.get $a)) (f64.const 0x1p-1020)) (f64.eq (local.get $a) (f64.const 0)))))
      (local.set $b (select (f64.mul (local.get $b) (f64.const 0.25)) (f64.copysign (f64.const 0x1p-1000) (local.get $b))
        (i32.or (f64.ge (f64.abs (local.get $b)) (f64.const 0x1p-1020)) (f64.eq (local.get $b) (f64.const 0)))))
      (local.set $k (i32.const -2))))
    (local.set $s (call $two_sum (local.get $a) (local.get $b)))
    (if (f64.eq (local.get $s) (f64.const 0)) (then
      ;; Zeros of one sign keep it; anything else cancelling exactly gives the mode's zero.
      (if (i32.and (i32.and (f64.eq (local.get $a) (f64.const 0)) (f64.eq (local.get $b) (f64.const 0)))
                   (i64.eq (i64.reinterpret_f64 (local.get $a)) (i64.reinterpret_f64 (local.get $b))))
        (then (return (local.get $a))))
      (return (call $fenv_zero (local.get $m)))))
    (call $fenv_round (local.get $s) (global.get $fenv_lo) (local.get $k) (local.get $single) (local.get $m)))

  ;; a * b.
  (func $fenv_mul (param $a f64) (param $b f64) (param $single i32) (param $m i32) (result f64)
    (local $ma f64) (local $e i32) (local $p f64)
    (if (i32.or (f64.ne (local.get $a) (local.get $a)) (f64.ne (local.get $b) (local.get $b)))
      (then (return (f64.const nan))))
    (if (i32.or (f64.eq (f64.abs (local.get $a)) (f64.const inf)) (f64.eq (f64.abs (local.get $b)) (f64.const inf))) (then
      (local.set $p (f64.mul (local.get $a) (local.get $b)))
      (if (f64.ne (local.get $p) (local.get $p)) (then (call $raise (i32.const 16))))
      (return (local.get $p))))
    (if (i32.or (f64.eq (local.get $a) (f64.const 0)) (f64.eq (local.get $b) (f64.const 0)))
      (then (return (f64.mul (local.get $a) (local.get $b)))))
    (local.set $ma (call $fenv_norm (local.get $a)))
    (local.set $e (global.get $fenv_exp))
    (local.set $p (call $two_prod (local.get $ma) (call $fenv_norm (local.get $b))))
    (call $fenv_round (local.get $p) (global.get $fenv_lo)
      (i32.sub (i32.const 0) (i32.add (local.get $e) (global.get $fenv_exp))) (local.get $single) (local.get $m)))

  ;; A stand-in for an error of sign $d below half an ulp of $q (0 when $d is 0).
  (func $fenv_sticky (param $q f64) (param $d f64) (result f64)
    (select (f64.const 0) (f64.copysign (f64.mul (f64.abs (local.get $q)) (f64.const 0x1p-55)) (local.get $d))
      (f64.eq (local.get $d) (f64.const 0))))

  ;; a / b.
  (func $fenv_div (param $a f64) (param $b f64) (param $single i32) (param $m i32) (result f64)
    (local $ma f64) (local $mb f64) (local $e i32) (local $q f64) (local $p f64) (local $d f64)
    (if (i32.or (f64.ne (local.get $a) (local.get $a)) (f64.ne (local.get $b) (local.get $b)))
      (then (return (f64.const nan))))
    (if (i32.or (i32.and (f64.eq (f64.abs (local.get $a)) (f64.const inf)) (f64.eq (f64.abs (local.get $b)) (f64.const inf)))
                (i32.and (f64.eq (local.get $a) (f64.const 0)) (f64.eq (local.get $b) (f64.const 0))))
      (then (call $raise (i32.const 16)) (return (f64.const nan))))
    (if (i32.and (f64.eq (local.get $b) (f64.const 0)) (f64.ne (f64.abs (local.get $a)) (f64.const inf)))
      (then (call $raise (i32.const 8))))
    (if (i32.or (i32.or (f64.eq (f64.abs (local.get $a)) (f64.const inf)) (f64.eq (f64.abs (local.get $b)) (f64.const inf)))
                (i32.or (f64.eq (local.get $a) (f64.const 0)) (f64.eq (local.get $b) (f64.const 0))))
      (then (return (f64.div (local.get $a) (local.get $b)))))
    (local.set $ma (f64.abs (call $fenv_norm (local.get $a))))
    (local.set $e (global.get $fenv_exp))
    (local.set $mb (f64.abs (call $fenv_norm (local.get $b))))
    (local.set $e (i32.sub (local.get $e) (global.get $fenv_exp)))
    (local.set $q (f64.div (local.get $ma) (local.get $mb)))
    ;; The residual a - q*b, exactly enough for its sign.
    (local.set $p (call $two_prod (local.get $q) (local.get $mb)))
    (local.set $d (f64.sub (f64.sub (local.get $ma) (local.get $p)) (global.get $fenv_lo)))
    (local.set $d (call $fenv_sticky (local.get $q) (local.get $d)))
    (if (i32.ne (f64.lt (local.get $a) (f64.const 0)) (f64.lt (local.get $b) (f64.const 0))) (then
      (local.set $q (f64.neg (local.get $q))) (local.set $d (f64.neg (local.get $d)))))
    (call $fenv_round (local.get $q) (local.get $d) (i32.sub (i32.const 0) (local.get $e)) (local.get $single) (local.get $m)))

  ;; The square root of a.
  (func $fenv_sqrt (param $a f64) (param $single i32) (param $m i32) (result f64)
    (local $ma f64) (local $e i32) (local $r f64) (local $p f64)
    (if (f64.ne (local.get $a) (local.get $a)) (then (return (f64.const nan))))
    (if (f64.lt (local.get $a) (f64.const 0)) (then (call $raise (i32.const 16)) (return (f64.const nan))))
    (if (i32.or (f64.eq (local.get $a) (f64.const 0)) (f64.eq (local.get $a) (f64.const inf)))
      (then (return (local.get $a))))
    (local.set $ma (call $fenv_norm (local.get $a)))
    (local.set $e (global.get $fenv_exp))
    (if (i32.and (local.get $e) (i32.const 1)) (then
      (local.set $ma (f64.mul (local.get $ma) (f64.const 2))) (local.set $e (i32.sub (local.get $e) (i32.const 1)))))
    (local.set $r (f64.sqrt (local.get $ma)))
    (local.set $p (call $two_prod (local.get $r) (local.get $r)))
    (call $fenv_round (local.get $r)
      (call $fenv_sticky (local.get $r) (f64.sub (f64.sub (local.get $ma) (local.get $p)) (global.get $fenv_lo)))
      (i32.sub (i32.const 0) (i32.shr_s (local.get $e) (i32.const 1))) (local.get $single) (local.get $m)))

  ;; a * b + c, rounded once.
  (func $fenv_fma (param $a f64) (param $b f64) (param $c f64) (param $single i32) (param $m i32) (result f64)
    (local $p f64) (local $ma f64) (local $e i32) (local $pl f64) (local $ec i32) (local $cc f64)
    (local $s1 f64) (local $u f64) (local $hi f64)
    ;; Infinity times zero is invalid even with a quiet NaN to add.
    (if (i32.or (i32.and (f64.eq (f64.abs (local.get $a)) (f64.const inf)) (f64.eq (local.get $b) (f64.const 0)))
                (i32.and (f64.eq (f64.abs (local.get $b)) (f64.const inf)) (f64.eq (local.get $a) (f64.const 0))))
      (then (call $raise (i32.const 16)) (return (f64.const nan))))
    (if (i32.or (i32.or (f64.ne (local.get $a) (local.get $a)) (f64.ne (local.get $b) (local.get $b)))
                (f64.ne (local.get $c) (local.get $c)))
      (then (return (f64.const nan))))
    (if (i32.or (f64.eq (f64.abs (local.get $a)) (f64.const inf)) (f64.eq (f64.abs (local.get $b)) (f64.const inf))) (then
      (local.set $p (f64.add (f64.mul (local.get $a) (local.get $b)) (local.get $c)))
      (if (f64.ne (local.get $p) (local.get $p)) (then (call $raise (i32.const 16))))
      (return (local.get $p))))
    (if (f64.eq (f64.abs (local.get $c)) (f64.const inf)) (then (return (local.get $c))))
    (if (i32.or (f64.eq (local.get $a) (f64.const 0)) (f64.eq (local.get $b) (f64.const 0))) (then
      (local.set $p (f64.mul (local.get $a) (local.get $b)))
      (if (f64.ne (local.get $c) (f64.const 0)) (then (return (local.get $c))))
      (return (select (local.get $c) (call $fenv_zero (local.get $m))
        (i64.eq (i64.reinterpret_f64 (local.get $p)) (i64.reinterpret_f64 (local.get $c)))))))
    (if (f64.eq (local.get $c) (f64.const 0))
      (then (return (call $fenv_mul (local.get $a) (local.get $b) (local.get $single) (local.get $m)))))
    (if (local.get $single) (then
      ;; A single's product is exact in a double, and the sum exact as a pair.
      (local.set $hi (call $two_sum (f64.mul (local.get $a) (local.get $b)) (local.get $c)))
      (if (f64.eq (local.get $hi) (f64.const 0)) (then (return (call $fenv_zero (local.get $m)))))
      (return (call $fenv_round (local.get $hi) (global.get $fenv_lo) (i32.const 0) (i32.const 1) (local.get $m)))))
    ;; Doubles: the product scaled to [1, 4) exactly as p + pl, times 2^e.
    (local.set $ma (call $fenv_norm (local.get $a)))
    (local.set $e (global.get $fenv_exp))
    (local.set $p (call $two_prod (local.get $ma) (call $fenv_norm (local.get $b))))
    (local.set $e (i32.add (local.get $e) (global.get $fenv_exp)))
    (local.set $pl (global.get $fenv_lo))
    (local.set $cc (call $fenv_norm (local.get $c)))
    (local.set $ec (global.get $fenv_exp))
    ;; c so much larger that the product only says which way to round.
    (if (i32.gt_s (local.get $ec) (i32.add (local.get $e) (i32.const 60))) (then
      (return (call $fenv_round (local.get $cc) (f64.copysign (f64.const 0x1p-60) (local.get $p))
        (i32.sub (i32.const 0) (local.get $ec)) (i32.const 0) (local.get $m)))))
    ;; c in the product's scale; far below its last bit only its sign counts.
    (local.set $cc (select (f64.copysign (f64.const 0x1p-200) (local.get $c)) (call $scale (local.get $c) (i32.sub (i32.const 0) (local.get $e)))
      (i32.lt_s (local.get $ec) (i32.sub (local.get $e) (i32.const 200)))))
    ;; p + pl + cc: the high sum exact, the low parts rounded to odd (keeping whether they
    ;; were exact), then the pair.
    (local.set $s1 (call $two_sum (local.get $p) (local.get $cc)))
    (local.set $u (call $add_odd (global.get $fenv_lo) (local.get $pl)))
    (local.set $hi (call $two_sum (local.get $s1) (local.get $u)))
    (if (f64.eq (local.get $hi) (f64.const 0)) (then (return (call $fenv_zero (local.get $m)))))
    (call $fenv_round (local.get $hi) (global.get $fenv_lo) (i32.sub (i32.const 0) (local.get $e)) (i32.const 0) (local.get $m)))

  ;; A rounding operation on registers (raw bits) of one format, in mode $rm (7: frm): $op 0
  ;; add, 1 sub, 2 mul, 3 div, 4 sqrt, 5 fmadd, 6 fmsub, 7 fnmsub, 8 fnmadd.
  (func $fenv_op (param $op i32) (param $x i64) (param $y i64) (param $z i64) (param $single i32) (param $rm i32) (param $pc i64) (result i64)
    (local $m i32) (local $a f64) (local $b f64) (local $c f64) (local $r f64)
    (local.set $m (call $rmode (local.get $rm) (local.get $pc)))
    (if (i32.or (i32.or (call $fenv_snan (local.get $x) (local.get $single))
                        (i32.and (i32.ne (local.get $op) (i32.const 4)) (call $fenv_snan (local.get $y) (local.get $single))))
                (i32.and (i32.ge_u (local.get $op) (i32.const 5)) (call $fenv_snan (local.get $z) (local.get $single))))
      (then (call $raise (i32.const 16))))
    (local.set $a (call $fenv_val (local.get $x) (local.get $single)))
    (local.set $b (call $fenv_val (local.get $y) (local.get $single)))
    (local.set $c (call $fenv_val (local.get $z) (local.get $single)))
    (local.set $r (block $done (result f64)
      (if (i32.le_u (local.get $op) (i32.const 1)) (then
        (br $done (call $fenv_add (local.get $a)
          (select (f64.neg (local.get $b)) (local.get $b) (local.get $op)) (local.get $single) (local.get $m)))))
      (if (i32.eq (local.get $op) (i32.const 2)) (then
        (br $done (call $fenv_mul (local.get $a) (local.get $b) (local.get $single) (local.get $m)))))
      (if (i32.eq (local.get $op) (i32.const 3)) (then
        (br $done (call $fenv_div (local.get $a) (local.get $b) (local.get $single) (local.get $m)))))
      (if (i32.eq (local.get $op) (i32.const 4)) (then
        (br $done (call $fenv_sqrt (local.get $a) (local.get $single) (local.get $m)))))
      ;; fmsub and fnmadd subtract c; fnmsub and fnmadd negate the product.
      (if (i32.or (i32.eq (local.get $op) (i32.const 6)) (i32.eq (local.get $op) (i32.const 8)))
        (then (local.set $c (f64.neg (local.get $c)))))
      (if (i32.ge_u (local.get $op) (i32.const 7)) (then (local.set $a (f64.neg (local.get $a)))))
      (call $fenv_fma (local.get $a) (local.get $b) (local.get $c) (local.get $single) (local.get $m))))
    (call $fenv_bits (local.get $r) (local.get $single)))

  ;; Integer (kind 0 w, 1 wu, 2 l, 3 lu) or double (kind 4) to a double ($single 0) or
  ;; single (1), in mode $rm.
  (func $fenv_cvt (param $kind i32) (param $x i64) (param $single i32) (param $rm i32) (param $pc i64) (result i64)
    (local $m i32) (local $hi f64) (local $lo f64) (local $vh i64)
    (local.set $m (call $rmode (local.get $rm) (local.get $pc)))
    (if (i32.eq (local.get $kind) (i32.const 4)) (then
      (local.set $hi (f64.reinterpret_i64 (local.get $x)))
      (if (call $fenv_snan (local.get $x) (i32.const 0)) (then (call $raise (i32.const 16))))
      (if (i32.or (f64.ne (local.get $hi) (local.get $hi))
            (i32.or (f64.eq (local.get $hi) (f64.const 0)) (f64.eq (f64.abs (local.get $hi)) (f64.const inf))))
        (then (return (call $fenv_bits (local.get $hi) (i32.const 1)))))
      (return (call $fenv_bits (call $fenv_round (local.get $hi) (f64.const 0) (i32.const 0) (i32.const 1) (local.get $m)) (i32.const 1)))))
    (block $exact
      (if (i32.eqz (local.get $kind)) (then
        (local.set $hi (f64.convert_i32_s (i32.wrap_i64 (local.get $x)))) (br $exact)))
      (if (i32.eq (local.get $kind) (i32.const 1)) (then
        (local.set $hi (f64.convert_i32_u (i32.wrap_i64 (local.get $x)))) (br $exact)))
      ;; 64 bits: the nearest double, and what it left out, exactly (from the 32-bit halves).
      (if (i32.eq (local.get $kind) (i32.const 2))
        (then
          (local.set $hi (f64.convert_i64_s (local.get $x)))
          (local.set $vh (i64.shr_s (local.get $x) (i64.const 32))))
        (else
          (local.set $hi (f64.convert_i64_u (local.get $x)))
          (local.set $vh (i64.shr_u (local.get $x) (i64.const 32)))))
      (local.set $lo (f64.add
        (f64.sub (f64.mul (f64.convert_i64_s (local.get $vh)) (f64.const 0x1p32)) (local.get $hi))
        (f64.convert_i64_u (i64.and (local.get $x) (i64.const 0xffffffff))))))
    (if (f64.eq (local.get $hi) (f64.const 0)) (then (return (call $fenv_bits (f64.const 0) (local.get $single)))))
    (call $fenv_bits (call $fenv_round (local.get $hi) (local.get $lo) (i32.const 0) (local.get $single) (local.get $m)) (local.get $single)))

  ;; The invalid flag of comparisons and min/max ($quiet: feq, fmin, fmax — only signaling
  ;; NaNs are invalid; flt, fle: any NaN), and of widening a single.
  (func $fenv_nv (param $quiet i32) (param $x i64) (param $y i64) (param $single i32)
    (local $a f64) (local $b f64)
    (local.set $a (call $fenv_val (local.get $x) (local.get $single)))
    (local.set $b (call $fenv_val (local.get $y) (local.get $single)))
    (if (if (result i32) (local.get $quiet)
          (then (i32.or (call $fenv_snan (local.get $x) (local.get $single)) (call $fenv_snan (local.get $y) (local.get $single))))
          (else (i32.or (f64.ne (local.get $a) (local.get $a)) (f64.ne (local.get $b) (local.get $b)))))
      (then (call $raise (i32.const 16)))))
