;; Recursive Fibonacci: recursion makes `fib` a continuation (its frames live on each VM's call
;; stack); `mix` is a plain fastcall. Try:
;;   warpvisor run examples/fib.wat --invoke fib --vms 8 -- 25
(module
  (func $fib (export "fib") (param $n i32) (result i64)
    (if (result i64) (i32.lt_u (local.get $n) (i32.const 2))
      (then (i64.extend_i32_u (local.get $n)))
      (else
        (i64.add
          (call $fib (i32.sub (local.get $n) (i32.const 1)))
          (call $fib (i32.sub (local.get $n) (i32.const 2)))))))
  (func (export "mix") (param $x i64) (result i64)
    (i64.rotl (i64.mul (local.get $x) (i64.const 0x9E3779B97F4A7C15)) (i64.const 31))))
