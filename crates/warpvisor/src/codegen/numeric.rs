//! The value operators: each WebAssembly numeric, conversion and memory-access operator as one
//! C line, built from a template over its operand slots (`$0`, `$1`) and destination (`$d`).

use wasmparser::{Operator, ValType};

use ValType::{F32, F64, I32, I64};

/// How one operator is written in C.
pub struct Template {
    /// Operand types, bottom of the stack first.
    pub inputs: &'static [ValType],
    /// Result type, if any.
    pub output: Option<ValType>,
    /// The statement; `$0`, `$1` are operands, `$d` the destination slot.
    pub text: String,
}

fn t(inputs: &'static [ValType], output: ValType, text: &str) -> Option<Template> {
    Some(Template {
        inputs,
        output: Some(output),
        text: text.to_string(),
    })
}

fn expr(inputs: &'static [ValType], output: ValType, e: &str) -> Option<Template> {
    t(inputs, output, &format!("$d = {e};"))
}

/// The template of a pure numeric or memory operator, or `None` for the other operators.
pub fn template(op: &Operator<'_>) -> Option<Template> {
    use Operator as O;
    const II: &[ValType] = &[I32, I32];
    const LL: &[ValType] = &[I64, I64];
    const FF: &[ValType] = &[F32, F32];
    const DD: &[ValType] = &[F64, F64];
    const I: &[ValType] = &[I32];
    const L: &[ValType] = &[I64];
    const F: &[ValType] = &[F32];
    const D: &[ValType] = &[F64];
    match op {
        O::I32Const { value } => expr(&[], I32, &format!("{}u", *value as u32)),
        O::I64Const { value } => expr(&[], I64, &format!("{}ull", *value as u64)),
        O::F32Const { value } => expr(
            &[],
            F32,
            &format!(
                "wv_f32_from_bits({:#010x}u) /* {} */",
                value.bits(),
                f32::from_bits(value.bits())
            ),
        ),
        O::F64Const { value } => expr(
            &[],
            F64,
            &format!(
                "wv_f64_from_bits({:#018x}ull) /* {} */",
                value.bits(),
                f64::from_bits(value.bits())
            ),
        ),
        // i32
        O::I32Eqz => expr(I, I32, "$0 == 0"),
        O::I32Eq => expr(II, I32, "$0 == $1"),
        O::I32Ne => expr(II, I32, "$0 != $1"),
        O::I32LtS => expr(II, I32, "(int32_t)$0 < (int32_t)$1"),
        O::I32LtU => expr(II, I32, "$0 < $1"),
        O::I32GtS => expr(II, I32, "(int32_t)$0 > (int32_t)$1"),
        O::I32GtU => expr(II, I32, "$0 > $1"),
        O::I32LeS => expr(II, I32, "(int32_t)$0 <= (int32_t)$1"),
        O::I32LeU => expr(II, I32, "$0 <= $1"),
        O::I32GeS => expr(II, I32, "(int32_t)$0 >= (int32_t)$1"),
        O::I32GeU => expr(II, I32, "$0 >= $1"),
        O::I32Clz => expr(I, I32, "wv_clz32($0)"),
        O::I32Ctz => expr(I, I32, "wv_ctz32($0)"),
        O::I32Popcnt => expr(I, I32, "wv_popcnt32($0)"),
        O::I32Add => expr(II, I32, "$0 + $1"),
        O::I32Sub => expr(II, I32, "$0 - $1"),
        O::I32Mul => expr(II, I32, "$0 * $1"),
        O::I32DivS => t(II, I32, "WV_I32_DIV_S($d, $0, $1);"),
        O::I32DivU => t(II, I32, "WV_I32_DIV_U($d, $0, $1);"),
        O::I32RemS => t(II, I32, "WV_I32_REM_S($d, $0, $1);"),
        O::I32RemU => t(II, I32, "WV_I32_REM_U($d, $0, $1);"),
        O::I32And => expr(II, I32, "$0 & $1"),
        O::I32Or => expr(II, I32, "$0 | $1"),
        O::I32Xor => expr(II, I32, "$0 ^ $1"),
        O::I32Shl => expr(II, I32, "$0 << ($1 & 31)"),
        O::I32ShrS => expr(II, I32, "wv_i32_shr_s($0, $1)"),
        O::I32ShrU => expr(II, I32, "$0 >> ($1 & 31)"),
        O::I32Rotl => expr(II, I32, "wv_i32_rotl($0, $1)"),
        O::I32Rotr => expr(II, I32, "wv_i32_rotr($0, $1)"),
        // i64
        O::I64Eqz => expr(L, I32, "$0 == 0"),
        O::I64Eq => expr(LL, I32, "$0 == $1"),
        O::I64Ne => expr(LL, I32, "$0 != $1"),
        O::I64LtS => expr(LL, I32, "(int64_t)$0 < (int64_t)$1"),
        O::I64LtU => expr(LL, I32, "$0 < $1"),
        O::I64GtS => expr(LL, I32, "(int64_t)$0 > (int64_t)$1"),
        O::I64GtU => expr(LL, I32, "$0 > $1"),
        O::I64LeS => expr(LL, I32, "(int64_t)$0 <= (int64_t)$1"),
        O::I64LeU => expr(LL, I32, "$0 <= $1"),
        O::I64GeS => expr(LL, I32, "(int64_t)$0 >= (int64_t)$1"),
        O::I64GeU => expr(LL, I32, "$0 >= $1"),
        O::I64Clz => expr(L, I64, "wv_clz64($0)"),
        O::I64Ctz => expr(L, I64, "wv_ctz64($0)"),
        O::I64Popcnt => expr(L, I64, "wv_popcnt64($0)"),
        O::I64Add => expr(LL, I64, "$0 + $1"),
        O::I64Sub => expr(LL, I64, "$0 - $1"),
        O::I64Mul => expr(LL, I64, "$0 * $1"),
        O::I64DivS => t(LL, I64, "WV_I64_DIV_S($d, $0, $1);"),
        O::I64DivU => t(LL, I64, "WV_I64_DIV_U($d, $0, $1);"),
        O::I64RemS => t(LL, I64, "WV_I64_REM_S($d, $0, $1);"),
        O::I64RemU => t(LL, I64, "WV_I64_REM_U($d, $0, $1);"),
        O::I64And => expr(LL, I64, "$0 & $1"),
        O::I64Or => expr(LL, I64, "$0 | $1"),
        O::I64Xor => expr(LL, I64, "$0 ^ $1"),
        O::I64Shl => expr(LL, I64, "$0 << ($1 & 63)"),
        O::I64ShrS => expr(LL, I64, "wv_i64_shr_s($0, $1)"),
        O::I64ShrU => expr(LL, I64, "$0 >> ($1 & 63)"),
        O::I64Rotl => expr(LL, I64, "wv_i64_rotl($0, $1)"),
        O::I64Rotr => expr(LL, I64, "wv_i64_rotr($0, $1)"),
        // f32
        O::F32Eq => expr(FF, I32, "$0 == $1"),
        O::F32Ne => expr(FF, I32, "$0 != $1"),
        O::F32Lt => expr(FF, I32, "$0 < $1"),
        O::F32Gt => expr(FF, I32, "$0 > $1"),
        O::F32Le => expr(FF, I32, "$0 <= $1"),
        O::F32Ge => expr(FF, I32, "$0 >= $1"),
        O::F32Abs => expr(F, F32, "wv_f32_abs($0)"),
        O::F32Neg => expr(F, F32, "wv_f32_neg($0)"),
        O::F32Ceil => expr(F, F32, "wv_f32_ceil($0)"),
        O::F32Floor => expr(F, F32, "wv_f32_floor($0)"),
        O::F32Trunc => expr(F, F32, "wv_f32_trunc($0)"),
        O::F32Nearest => expr(F, F32, "wv_f32_nearest($0)"),
        O::F32Sqrt => expr(F, F32, "wv_f32_sqrt($0)"),
        O::F32Add => expr(FF, F32, "wv_f32_add($0, $1)"),
        O::F32Sub => expr(FF, F32, "wv_f32_sub($0, $1)"),
        O::F32Mul => expr(FF, F32, "wv_f32_mul($0, $1)"),
        O::F32Div => expr(FF, F32, "wv_f32_div($0, $1)"),
        O::F32Min => expr(FF, F32, "wv_f32_min($0, $1)"),
        O::F32Max => expr(FF, F32, "wv_f32_max($0, $1)"),
        O::F32Copysign => expr(FF, F32, "wv_f32_copysign($0, $1)"),
        // f64
        O::F64Eq => expr(DD, I32, "$0 == $1"),
        O::F64Ne => expr(DD, I32, "$0 != $1"),
        O::F64Lt => expr(DD, I32, "$0 < $1"),
        O::F64Gt => expr(DD, I32, "$0 > $1"),
        O::F64Le => expr(DD, I32, "$0 <= $1"),
        O::F64Ge => expr(DD, I32, "$0 >= $1"),
        O::F64Abs => expr(D, F64, "wv_f64_abs($0)"),
        O::F64Neg => expr(D, F64, "wv_f64_neg($0)"),
        O::F64Ceil => expr(D, F64, "wv_f64_ceil($0)"),
        O::F64Floor => expr(D, F64, "wv_f64_floor($0)"),
        O::F64Trunc => expr(D, F64, "wv_f64_trunc($0)"),
        O::F64Nearest => expr(D, F64, "wv_f64_nearest($0)"),
        O::F64Sqrt => expr(D, F64, "wv_f64_sqrt($0)"),
        O::F64Add => expr(DD, F64, "wv_f64_add($0, $1)"),
        O::F64Sub => expr(DD, F64, "wv_f64_sub($0, $1)"),
        O::F64Mul => expr(DD, F64, "wv_f64_mul($0, $1)"),
        O::F64Div => expr(DD, F64, "wv_f64_div($0, $1)"),
        O::F64Min => expr(DD, F64, "wv_f64_min($0, $1)"),
        O::F64Max => expr(DD, F64, "wv_f64_max($0, $1)"),
        O::F64Copysign => expr(DD, F64, "wv_f64_copysign($0, $1)"),
        // conversions
        O::I32WrapI64 => expr(L, I32, "(uint32_t)$0"),
        O::I32TruncF32S => t(F, I32, "WV_I32_TRUNC_F32_S($d, $0);"),
        O::I32TruncF32U => t(F, I32, "WV_I32_TRUNC_F32_U($d, $0);"),
        O::I32TruncF64S => t(D, I32, "WV_I32_TRUNC_F64_S($d, $0);"),
        O::I32TruncF64U => t(D, I32, "WV_I32_TRUNC_F64_U($d, $0);"),
        O::I64ExtendI32S => expr(I, I64, "wv_u32_s64($0)"),
        O::I64ExtendI32U => expr(I, I64, "(uint64_t)$0"),
        O::I64TruncF32S => t(F, I64, "WV_I64_TRUNC_F32_S($d, $0);"),
        O::I64TruncF32U => t(F, I64, "WV_I64_TRUNC_F32_U($d, $0);"),
        O::I64TruncF64S => t(D, I64, "WV_I64_TRUNC_F64_S($d, $0);"),
        O::I64TruncF64U => t(D, I64, "WV_I64_TRUNC_F64_U($d, $0);"),
        O::F32ConvertI32S => expr(I, F32, "(float)(int32_t)$0"),
        O::F32ConvertI32U => expr(I, F32, "(float)$0"),
        O::F32ConvertI64S => expr(L, F32, "(float)(int64_t)$0"),
        O::F32ConvertI64U => expr(L, F32, "wv_f32_convert_u64($0)"),
        O::F32DemoteF64 => expr(D, F32, "wv_f32_demote_f64($0)"),
        O::F64ConvertI32S => expr(I, F64, "(double)(int32_t)$0"),
        O::F64ConvertI32U => expr(I, F64, "(double)$0"),
        O::F64ConvertI64S => expr(L, F64, "(double)(int64_t)$0"),
        O::F64ConvertI64U => expr(L, F64, "wv_f64_convert_u64($0)"),
        O::F64PromoteF32 => expr(F, F64, "wv_f64_promote_f32($0)"),
        O::I32ReinterpretF32 => expr(F, I32, "wv_f32_bits($0)"),
        O::I64ReinterpretF64 => expr(D, I64, "wv_f64_bits($0)"),
        O::F32ReinterpretI32 => expr(I, F32, "wv_f32_from_bits($0)"),
        O::F64ReinterpretI64 => expr(L, F64, "wv_f64_from_bits($0)"),
        O::I32Extend8S => expr(I, I32, "wv_u8_s32($0)"),
        O::I32Extend16S => expr(I, I32, "wv_u16_s32($0)"),
        O::I64Extend8S => expr(L, I64, "wv_u8_s64($0)"),
        O::I64Extend16S => expr(L, I64, "wv_u16_s64($0)"),
        O::I64Extend32S => expr(L, I64, "wv_u32_s64($0)"),
        O::I32TruncSatF32S => expr(F, I32, "wv_i32_trunc_sat_f32_s($0)"),
        O::I32TruncSatF32U => expr(F, I32, "wv_i32_trunc_sat_f32_u($0)"),
        O::I32TruncSatF64S => expr(D, I32, "wv_i32_trunc_sat_f64_s($0)"),
        O::I32TruncSatF64U => expr(D, I32, "wv_i32_trunc_sat_f64_u($0)"),
        O::I64TruncSatF32S => expr(F, I64, "wv_i64_trunc_sat_f32_s($0)"),
        O::I64TruncSatF32U => expr(F, I64, "wv_i64_trunc_sat_f32_u($0)"),
        O::I64TruncSatF64S => expr(D, I64, "wv_i64_trunc_sat_f64_s($0)"),
        O::I64TruncSatF64U => expr(D, I64, "wv_i64_trunc_sat_f64_u($0)"),
        // memory
        O::I32Load { memarg } => load(I32, "wv_as_u32", 4, memarg.offset),
        O::I64Load { memarg } => load(I64, "wv_as_u64", 8, memarg.offset),
        O::F32Load { memarg } => load(F32, "wv_as_f32", 4, memarg.offset),
        O::F64Load { memarg } => load(F64, "wv_as_f64", 8, memarg.offset),
        O::I32Load8S { memarg } => load(I32, "wv_u8_s32", 1, memarg.offset),
        O::I32Load8U { memarg } => load(I32, "wv_as_u32", 1, memarg.offset),
        O::I32Load16S { memarg } => load(I32, "wv_u16_s32", 2, memarg.offset),
        O::I32Load16U { memarg } => load(I32, "wv_as_u32", 2, memarg.offset),
        O::I64Load8S { memarg } => load(I64, "wv_u8_s64", 1, memarg.offset),
        O::I64Load8U { memarg } => load(I64, "wv_as_u64", 1, memarg.offset),
        O::I64Load16S { memarg } => load(I64, "wv_u16_s64", 2, memarg.offset),
        O::I64Load16U { memarg } => load(I64, "wv_as_u64", 2, memarg.offset),
        O::I64Load32S { memarg } => load(I64, "wv_u32_s64", 4, memarg.offset),
        O::I64Load32U { memarg } => load(I64, "wv_as_u64", 4, memarg.offset),
        O::I32Store { memarg } => store(&[I32, I32], "$1", 4, memarg.offset),
        O::I64Store { memarg } => store(&[I32, I64], "$1", 8, memarg.offset),
        O::F32Store { memarg } => store(&[I32, F32], "wv_f32_bits($1)", 4, memarg.offset),
        O::F64Store { memarg } => store(&[I32, F64], "wv_f64_bits($1)", 8, memarg.offset),
        O::I32Store8 { memarg } => store(&[I32, I32], "$1", 1, memarg.offset),
        O::I32Store16 { memarg } => store(&[I32, I32], "$1", 2, memarg.offset),
        O::I64Store8 { memarg } => store(&[I32, I64], "$1", 1, memarg.offset),
        O::I64Store16 { memarg } => store(&[I32, I64], "$1", 2, memarg.offset),
        O::I64Store32 { memarg } => store(&[I32, I64], "$1", 4, memarg.offset),
        O::MemorySize { .. } => expr(&[], I32, "(uint32_t)(msz >> 16)"),
        O::MemoryGrow { .. } => t(
            I,
            I32,
            "$d = wv_memory_grow(f, vm, $0); msz = WV_MEM_BYTES();",
        ),
        _ => None,
    }
}

fn load(ty: ValType, conv: &str, width: u32, offset: u64) -> Option<Template> {
    t(
        &[I32],
        ty,
        &format!("WV_LOAD($d, {conv}, $0, {offset}ull, {width});"),
    )
}

fn store(inputs: &'static [ValType], value: &str, width: u32, offset: u64) -> Option<Template> {
    Some(Template {
        inputs,
        output: None,
        text: format!("WV_STORE($0, {offset}ull, {width}, {value});"),
    })
}
