//! PTX text → tokens, each with its line. Directives and modifiers come out as `.name`
//! tokens, registers as `%name`; `%tid.x` is `%tid` then `.x` (the parser joins them).

use super::PtxError;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub enum Token {
    /// An identifier, directive (`.entry`), modifier (`.f32`) or register (`%r1`).
    Word(String),
    /// An integer literal.
    Int(i64),
    /// `0fXXXXXXXX`.
    F32(u32),
    /// `0dXXXXXXXXXXXXXXXX`, or a decimal literal with a point.
    F64(u64),
    /// A string literal (`.file`, `.pragma`).
    Str(String),
    /// Punctuation: `, ; : { } [ ] ( ) @ ! + - < > | =`.
    Punct(char),
}

/// A token and the line it starts on (1-based).
#[derive(Debug, Clone)]
pub struct Spanned {
    /// The token.
    pub token: Token,
    /// Its line.
    pub line: usize,
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '$'
}

/// Splits `text` into tokens; comments are dropped.
pub fn tokenize(text: &str) -> Result<Vec<Spanned>, PtxError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                if chars[i] == '\n' {
                    line += 1;
                }
                i += 1;
            }
            i += 2;
            continue;
        }
        let start = i;
        let token = if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += 1;
            }
            i += 1;
            Token::Str(chars[start + 1..(i - 1).max(start + 1)].iter().collect())
        } else if c.is_ascii_digit() {
            while i < chars.len() && (word_char(chars[i]) || chars[i] == '.') {
                i += 1;
            }
            let raw: String = chars[start..i].iter().collect();
            number(&raw).ok_or_else(|| PtxError::parse(line, format!("bad number `{raw}`")))?
        } else if c == '.' || c == '%' || word_char(c) {
            i += 1;
            while i < chars.len() && word_char(chars[i]) {
                i += 1;
            }
            Token::Word(chars[start..i].iter().collect())
        } else if ",;:{}[]()@!+-<>|=".contains(c) {
            i += 1;
            Token::Punct(c)
        } else {
            return Err(PtxError::parse(line, format!("unexpected character `{c}`")));
        };
        out.push(Spanned { token, line });
    }
    Ok(out)
}

/// A numeric literal: decimal, `0x` hex (optional `U` suffix), `0f`/`0d` float bits, or a
/// decimal float.
fn number(raw: &str) -> Option<Token> {
    let lower = raw.to_ascii_lowercase();
    let body = lower.trim_end_matches('u');
    if let Some(hex) = body.strip_prefix("0f") {
        if hex.len() == 8 {
            return u32::from_str_radix(hex, 16).ok().map(Token::F32);
        }
    }
    if let Some(hex) = body.strip_prefix("0d") {
        if hex.len() == 16 {
            return u64::from_str_radix(hex, 16).ok().map(Token::F64);
        }
    }
    if let Some(hex) = body.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16)
            .ok()
            .map(|v| Token::Int(v as i64));
    }
    if body.contains('.') || body.contains('e') {
        return body.parse::<f64>().ok().map(|f| Token::F64(f.to_bits()));
    }
    if body.len() > 1 && body.starts_with('0') && body.bytes().all(|b| b.is_ascii_digit()) {
        return u64::from_str_radix(&body[1..], 8)
            .ok()
            .map(|v| Token::Int(v as i64));
    }
    body.parse::<u64>().ok().map(|v| Token::Int(v as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_words() {
        let t: Vec<Token> = tokenize("mov.f32 %f1, 0f3F800000; // c\n add 0x10, -3, 1.5")
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.token)
            .collect();
        assert_eq!(
            t,
            vec![
                Token::Word("mov".into()),
                Token::Word(".f32".into()),
                Token::Word("%f1".into()),
                Token::Punct(','),
                Token::F32(0x3F80_0000),
                Token::Punct(';'),
                Token::Word("add".into()),
                Token::Int(16),
                Token::Punct(','),
                Token::Punct('-'),
                Token::Int(3),
                Token::Punct(','),
                Token::F64(1.5f64.to_bits()),
            ]
        );
    }
}
