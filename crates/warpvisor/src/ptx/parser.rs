//! Tokens → [`PtxModule`]. Module directives, variables, kernels and functions with their
//! parameters, register declarations, labels and instructions; debug directives (`.file`,
//! `.loc`) and performance hints (`.maxntid`, `.pragma`, ...) are read and dropped.

use super::ast::{
    Function, Guard, Instruction, Operand, Param, PtxModule, Register, Scalar, Space, Statement,
    Variable,
};
use super::lexer::{tokenize, Spanned, Token};
use super::PtxError;

/// Parses a whole PTX module.
pub fn parse(text: &str) -> Result<PtxModule, PtxError> {
    let tokens = tokenize(text)?;
    let mut p = Parser {
        tokens,
        at: 0,
        declared: Default::default(),
    };
    p.module()
}

struct Parser {
    tokens: Vec<Spanned>,
    at: usize,
    /// The current function's register names (declarations may repeat one).
    declared: std::collections::HashSet<String>,
}

/// Registers one function may declare: NVVM's largest kernels declare tens of thousands;
/// more than this is a malformed (or hostile) module, not a program.
const MAX_REGISTERS: u64 = 1 << 20;

/// Directives that end at their line (no semicolon).
const LINE_DIRECTIVES: &[&str] = &[".file", ".loc"];
/// Hints between a function's header and body.
const FUNCTION_HINTS: &[&str] = &[
    ".maxntid",
    ".reqntid",
    ".minnctapersm",
    ".maxnctapersm",
    ".maxnreg",
    ".noreturn",
    ".explicitcluster",
    ".reqnctapercluster",
    ".maxclusterrank",
];

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at).map(|s| &s.token)
    }

    fn peek_at(&self, k: usize) -> Option<&Token> {
        self.tokens.get(self.at + k).map(|s| &s.token)
    }

    fn line(&self) -> usize {
        self.tokens
            .get(self.at)
            .or_else(|| self.tokens.last())
            .map_or(0, |s| s.line)
    }

    fn err<T>(&self, message: impl Into<String>) -> Result<T, PtxError> {
        Err(PtxError::parse(self.line(), message))
    }

    fn next(&mut self) -> Result<Token, PtxError> {
        let t = self.peek().cloned();
        match t {
            Some(t) => {
                self.at += 1;
                Ok(t)
            }
            None => self.err("unexpected end of the module"),
        }
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek() == Some(&Token::Punct(c))
    }

    fn eat_punct(&mut self, c: char) -> bool {
        let yes = self.is_punct(c);
        if yes {
            self.at += 1;
        }
        yes
    }

    fn expect_punct(&mut self, c: char) -> Result<(), PtxError> {
        if self.eat_punct(c) {
            Ok(())
        } else {
            self.err(format!("expected `{c}`, found {}", self.describe()))
        }
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "the end".into(),
            Some(Token::Word(w)) => format!("`{w}`"),
            Some(Token::Punct(c)) => format!("`{c}`"),
            Some(t) => format!("{t:?}"),
        }
    }

    fn word(&mut self) -> Result<String, PtxError> {
        match self.next()? {
            Token::Word(w) => Ok(w),
            t => {
                self.at -= 1;
                self.err(format!("expected a name, found {t:?}"))
            }
        }
    }

    fn int(&mut self) -> Result<i64, PtxError> {
        let neg = self.eat_punct('-');
        match self.next()? {
            Token::Int(v) => Ok(if neg { v.wrapping_neg() } else { v }),
            t => {
                self.at -= 1;
                self.err(format!("expected an integer, found {t:?}"))
            }
        }
    }

    fn peek_word(&self) -> Option<&str> {
        match self.peek() {
            Some(Token::Word(w)) => Some(w),
            _ => None,
        }
    }

    /// Skips the rest of the current token's line.
    fn skip_line(&mut self) {
        let line = self.line();
        while self.tokens.get(self.at).is_some_and(|s| s.line == line) {
            self.at += 1;
        }
    }

    /// Skips through the next `;`.
    fn skip_statement(&mut self) -> Result<(), PtxError> {
        while !self.eat_punct(';') {
            self.next()?;
        }
        Ok(())
    }

    fn module(&mut self) -> Result<PtxModule, PtxError> {
        let mut m = PtxModule {
            address_size: 64,
            ..PtxModule::default()
        };
        while let Some(t) = self.peek().cloned() {
            let Token::Word(w) = t else {
                return self.err(format!("unexpected {} at module scope", self.describe()));
            };
            match w.as_str() {
                ".version" => {
                    self.at += 1;
                    m.version = match self.next()? {
                        Token::Int(v) => v.to_string(),
                        Token::F64(bits) => format!("{}", f64::from_bits(bits)),
                        t => return self.err(format!("bad .version {t:?}")),
                    };
                }
                ".target" => {
                    self.at += 1;
                    m.target.push(self.word()?);
                    while self.eat_punct(',') {
                        m.target.push(self.word()?);
                    }
                }
                ".address_size" => {
                    self.at += 1;
                    m.address_size = self.int()? as u32;
                    if m.address_size != 64 {
                        return self.err("only .address_size 64 is supported");
                    }
                }
                ".visible" | ".extern" | ".weak" | ".common" => self.at += 1,
                ".pragma" => self.skip_statement()?,
                ".entry" | ".func" => {
                    let f = self.function()?;
                    m.functions.push(f);
                }
                ".global" | ".const" | ".shared" => {
                    let v = self.variable(true)?;
                    m.variables.push(v);
                }
                // Debug sections (`-G`): `.section .debug_info { ... }`.
                ".section" => {
                    self.skip_line();
                    if self.eat_punct('{') {
                        let mut depth = 1;
                        while depth > 0 {
                            match self.next()? {
                                Token::Punct('{') => depth += 1,
                                Token::Punct('}') => depth -= 1,
                                _ => {}
                            }
                        }
                    }
                }
                d if LINE_DIRECTIVES.contains(&d) => self.skip_line(),
                other => return self.err(format!("unsupported directive `{other}`")),
            }
        }
        Ok(m)
    }

    /// `.global .align 4 .b8 name[16] = {1, 2, ...};` (also inside bodies).
    fn variable(&mut self, module_scope: bool) -> Result<Variable, PtxError> {
        let line = self.line();
        let space_word = self.word()?;
        let space = Space::from_modifier(&space_word[1..])
            .ok_or_else(|| PtxError::parse(line, format!("bad state space {space_word}")))?;
        let mut align = 0;
        let mut ty = None;
        loop {
            match self.peek_word() {
                Some(".align") => {
                    self.at += 1;
                    align = self.int()? as u32;
                }
                Some(".v2" | ".v4") => {
                    return self.err("vector variables are not supported");
                }
                Some(w) if w.starts_with('.') => {
                    let w = w.to_string();
                    self.at += 1;
                    match Scalar::from_modifier(&w[1..]) {
                        Some(t) => ty = Some(t),
                        None if w == ".ptr" || Space::from_modifier(&w[1..]).is_some() => {}
                        None => return self.err(format!("unsupported variable attribute {w}")),
                    }
                }
                _ => break,
            }
        }
        let ty = ty.ok_or_else(|| PtxError::parse(line, "variable without a type"))?;
        let name = self.word()?;
        let mut count = Some(1);
        if self.eat_punct('[') {
            count = if self.is_punct(']') {
                None
            } else {
                Some(self.int()? as u64)
            };
            self.expect_punct(']')?;
        }
        let mut init = Vec::new();
        if self.eat_punct('=') {
            if !module_scope {
                return self.err("initialised variables inside functions are not supported");
            }
            let mut values = Vec::new();
            if self.eat_punct('{') {
                loop {
                    values.push(self.init_value(ty)?);
                    if !self.eat_punct(',') {
                        break;
                    }
                }
                self.expect_punct('}')?;
            } else {
                values.push(self.init_value(ty)?);
            }
            for v in values {
                init.extend_from_slice(&v.to_le_bytes()[..ty.bytes() as usize]);
            }
        }
        self.expect_punct(';')?;
        Ok(Variable {
            name,
            space,
            align: align.max(ty.bytes()),
            ty,
            count,
            init,
            line,
        })
    }

    fn init_value(&mut self, ty: Scalar) -> Result<u64, PtxError> {
        let neg = self.eat_punct('-');
        let v = match self.next()? {
            Token::Int(v) => v as u64,
            Token::F32(b) => b as u64,
            Token::F64(b) if ty == Scalar::F(32) => (f64::from_bits(b) as f32).to_bits() as u64,
            Token::F64(b) => b,
            Token::Word(w) => {
                return self.err(format!(
                    "initialiser `{w}` (addresses of symbols) is not supported"
                ))
            }
            t => return self.err(format!("bad initialiser {t:?}")),
        };
        Ok(if neg { v.wrapping_neg() } else { v })
    }

    fn param_list(&mut self) -> Result<Vec<Param>, PtxError> {
        let mut params = Vec::new();
        self.expect_punct('(')?;
        if self.eat_punct(')') {
            return Ok(params);
        }
        loop {
            let v = self.param()?;
            params.push(v);
            if !self.eat_punct(',') {
                break;
            }
        }
        self.expect_punct(')')?;
        Ok(params)
    }

    /// `.param .align 8 .b8 name[16]` or `.param .u64 .ptr .global .align 4 name` or
    /// `.reg .b32 name` (in `.func` lists).
    fn param(&mut self) -> Result<Param, PtxError> {
        let line = self.line();
        match self.word()?.as_str() {
            ".param" | ".reg" => {}
            w => return self.err(format!("expected .param, found `{w}`")),
        }
        let mut align = 0;
        let mut ty = None;
        while let Some(w) = self
            .peek_word()
            .filter(|w| w.starts_with('.'))
            .map(String::from)
        {
            self.at += 1;
            if w == ".align" {
                align = self.int()? as u32;
            } else if let Some(t) = Scalar::from_modifier(&w[1..]) {
                ty = Some(t);
            } else if w != ".ptr" && Space::from_modifier(&w[1..]).is_none() {
                return self.err(format!("unsupported parameter attribute {w}"));
            }
        }
        let ty = ty.ok_or_else(|| PtxError::parse(line, "parameter without a type"))?;
        let name = self.word()?;
        let mut count = 1;
        if self.eat_punct('[') {
            count = self.int()? as u64;
            self.expect_punct(']')?;
        }
        Ok(Param {
            name,
            ty,
            align: align.max(ty.bytes()),
            count,
        })
    }

    fn function(&mut self) -> Result<Function, PtxError> {
        let line = self.line();
        let is_entry = self.word()? == ".entry";
        let returns = if !is_entry && self.is_punct('(') {
            self.param_list()?
        } else {
            Vec::new()
        };
        let name = self.word()?;
        let params = if self.is_punct('(') {
            self.param_list()?
        } else {
            Vec::new()
        };
        self.declared.clear();
        let mut f = Function {
            name,
            is_entry,
            returns,
            params,
            registers: Vec::new(),
            variables: Vec::new(),
            body: None,
            line,
        };
        while let Some(w) = self.peek_word() {
            if FUNCTION_HINTS.contains(&w) {
                self.at += 1;
                while matches!(self.peek(), Some(Token::Int(_)) | Some(Token::Punct(','))) {
                    self.at += 1;
                }
            } else if w == ".pragma" {
                self.skip_statement()?;
            } else {
                break;
            }
        }
        if self.eat_punct(';') {
            return Ok(f);
        }
        self.expect_punct('{')?;
        let mut body = Vec::new();
        self.block(&mut f, &mut body)?;
        f.body = Some(body);
        Ok(f)
    }

    /// Statements up to the `}` closing a block; nested blocks are flattened.
    fn block(&mut self, f: &mut Function, body: &mut Vec<Statement>) -> Result<(), PtxError> {
        loop {
            if self.eat_punct('}') {
                return Ok(());
            }
            if self.eat_punct('{') {
                self.block(f, body)?;
                continue;
            }
            let line = self.line();
            match self.peek().cloned() {
                None => return self.err("unclosed function body"),
                Some(Token::Word(w)) if w == ".reg" => self.registers(f)?,
                Some(Token::Word(w))
                    if matches!(
                        w.as_str(),
                        ".local" | ".shared" | ".param" | ".global" | ".const"
                    ) =>
                {
                    // Call blocks redeclare `param0`, `retval0`, ... with their own types:
                    // one variable of the largest size serves them all.
                    let v = self.variable(false)?;
                    match f.variables.iter_mut().find(|x| x.name == v.name) {
                        Some(x) if v.bytes() > x.bytes() => *x = v,
                        Some(_) => {}
                        None => f.variables.push(v),
                    }
                }
                Some(Token::Word(w)) if w == ".pragma" => self.skip_statement()?,
                Some(Token::Word(w)) if LINE_DIRECTIVES.contains(&w.as_str()) => self.skip_line(),
                Some(Token::Word(w)) if self.peek_at(1) == Some(&Token::Punct(':')) => {
                    self.at += 2;
                    if self.peek_word() == Some(".branchtargets") {
                        self.at += 1;
                        let mut targets = vec![self.word()?];
                        while self.eat_punct(',') {
                            targets.push(self.word()?);
                        }
                        self.expect_punct(';')?;
                        body.push(Statement::BranchTargets(w, targets));
                    } else {
                        body.push(Statement::Label(w));
                    }
                }
                Some(_) => {
                    let i = self.instruction(line)?;
                    body.push(Statement::Instr(i));
                }
            }
        }
    }

    fn push_register(&mut self, f: &mut Function, name: String, ty: Scalar) {
        if self.declared.insert(name.clone()) {
            f.registers.push(Register { name, ty });
        }
    }

    /// `.reg .b32 %r<6>;` or `.reg .pred %p, %q;`
    fn registers(&mut self, f: &mut Function) -> Result<(), PtxError> {
        self.at += 1;
        let w = self.word()?;
        if w == ".v2" || w == ".v4" {
            return self.err("vector registers are not supported");
        }
        let ty = Scalar::from_modifier(w.trim_start_matches('.'))
            .ok_or_else(|| PtxError::parse(self.line(), format!("bad register type {w}")))?;
        loop {
            let name = self.word()?;
            let name = name.trim_start_matches('%').to_string();
            if self.eat_punct('<') {
                let n = self.int()?;
                self.expect_punct('>')?;
                if n < 0 {
                    return self.err(format!("declares %{name}<{n}>: a negative register count"));
                }
                if f.registers.len() as u64 + n as u64 > MAX_REGISTERS {
                    return self.err(format!(
                        "declares %{name}<{n}>: more than {MAX_REGISTERS} registers in one function"
                    ));
                }
                for k in 0..n {
                    self.push_register(f, format!("{name}{k}"), ty);
                }
            } else {
                self.push_register(f, name, ty);
            }
            if !self.eat_punct(',') {
                break;
            }
        }
        self.expect_punct(';')
    }

    fn instruction(&mut self, line: usize) -> Result<Instruction, PtxError> {
        let mut guard = None;
        if self.eat_punct('@') {
            let negated = self.eat_punct('!');
            let reg = self.word()?;
            guard = Some(Guard {
                reg: reg.trim_start_matches('%').to_string(),
                negated,
            });
        }
        let opcode = self.word()?;
        if opcode.starts_with('.') || opcode.starts_with('%') {
            return self.err(format!("expected an instruction, found `{opcode}`"));
        }
        let mut modifiers = Vec::new();
        while let Some(w) = self.peek_word().filter(|w| w.starts_with('.')) {
            modifiers.push(w[1..].to_string());
            self.at += 1;
        }
        let mut operands = Vec::new();
        if !self.is_punct(';') {
            loop {
                operands.push(self.operand()?);
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        self.expect_punct(';')?;
        Ok(Instruction {
            guard,
            opcode,
            modifiers,
            operands,
            line,
        })
    }

    fn operand(&mut self) -> Result<Operand, PtxError> {
        if self.eat_punct('[') {
            let mut base = None;
            let mut offset = 0i64;
            if !matches!(self.peek(), Some(Token::Int(_)) | Some(Token::Punct('-'))) {
                base = Some(Box::new(self.operand()?));
            }
            loop {
                // `[%r+4]`, `[%r+-4]`, `[%r-4]` and `[16]`.
                let plus = self.eat_punct('+');
                if plus || matches!(self.peek(), Some(Token::Int(_)) | Some(Token::Punct('-'))) {
                    offset = offset.wrapping_add(self.int()?);
                } else {
                    break;
                }
            }
            self.expect_punct(']')?;
            return Ok(Operand::Address(base, offset));
        }
        if self.is_punct('{') || self.is_punct('(') {
            let close = if self.eat_punct('{') {
                '}'
            } else {
                self.at += 1;
                ')'
            };
            let mut items = Vec::new();
            if !self.eat_punct(close) {
                loop {
                    items.push(self.operand()?);
                    if !self.eat_punct(',') {
                        break;
                    }
                }
                self.expect_punct(close)?;
            }
            return Ok(if close == '}' {
                Operand::Vector(items)
            } else {
                Operand::List(items)
            });
        }
        if self.eat_punct('!') {
            let r = self.word()?;
            return Ok(Operand::NotReg(r.trim_start_matches('%').to_string()));
        }
        match self.next()? {
            Token::Int(v) => Ok(Operand::Int(v)),
            Token::F32(b) => Ok(Operand::Float32(b)),
            Token::F64(b) => Ok(Operand::Float64(b)),
            Token::Punct('-') => match self.next()? {
                Token::Int(v) => Ok(Operand::Int(v.wrapping_neg())),
                t => self.err(format!("bad negative operand {t:?}")),
            },
            Token::Word(w) if w.starts_with('%') => {
                let mut name = w[1..].to_string();
                // Special registers with a component: %tid.x, %ntid.y, ...
                if let Some(c) = self
                    .peek_word()
                    .filter(|c| matches!(*c, ".x" | ".y" | ".z"))
                {
                    name.push_str(c);
                    self.at += 1;
                }
                if self.eat_punct('|') {
                    let p = self.word()?;
                    return Ok(Operand::Pair(name, p.trim_start_matches('%').to_string()));
                }
                Ok(Operand::Reg(name))
            }
            Token::Word(w) if w == "WARP_SZ" => Ok(Operand::Int(32)),
            Token::Word(w) => Ok(Operand::Symbol(w)),
            t => self.err(format!("unexpected operand {t:?}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTOR_ADD: &str = r#"
.version 8.8
.target sm_70
.address_size 64
.visible .entry vector_add(
	.param .u64 vector_add_param_0,
	.param .u32 vector_add_param_1
)
.maxntid 256, 1, 1
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	ld.param.u32 	%r2, [vector_add_param_1];
	mov.u32 	%r3, %ctaid.x;
	@!%p1 bra 	$L__BB0_2;
	shfl.sync.down.b32 	%r1|%p1, %r2, 16, 31, -1;
	st.global.v2.f32 	[%rd10+-8], {%f1, %f2};
$L__BB0_2:
	ret;
}
"#;

    #[test]
    fn a_kernel_with_its_parameters_registers_and_instructions() {
        let m = parse(VECTOR_ADD).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (m.version.as_str(), m.target.as_slice()),
            ("8.8", &["sm_70".to_string()][..])
        );
        let f = &m.functions[0];
        assert!(f.is_entry);
        assert_eq!(f.params.len(), 2);
        assert_eq!(f.params[1].ty, Scalar::U(32));
        assert_eq!(f.registers.len(), 8);
        let body = f.body.as_ref().map_or(0, |b| b.len());
        assert_eq!(body, 7);
        let Some(Statement::Instr(i)) = f.body.as_ref().and_then(|b| b.get(2)) else {
            panic!("no bra");
        };
        assert_eq!(
            i.guard,
            Some(Guard {
                reg: "p1".into(),
                negated: true
            })
        );
        let Some(Statement::Instr(s)) = f.body.as_ref().and_then(|b| b.get(3)) else {
            panic!("no shfl");
        };
        assert_eq!(s.operands[0], Operand::Pair("r1".into(), "p1".into()));
        assert_eq!(s.operands[4], Operand::Int(-1));
        let Some(Statement::Instr(st)) = f.body.as_ref().and_then(|b| b.get(4)) else {
            panic!("no st");
        };
        assert_eq!(
            st.operands[0],
            Operand::Address(Some(Box::new(Operand::Reg("rd10".into()))), -8)
        );
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse(".version 8.8\n.target sm_70\n.bogus 3;")
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("PTX line 3: unsupported directive `.bogus`")
        );
    }
}
