//! Reproduces the `SyntaxError` messages that Node 22's `JSON.parse` (V8 12.4)
//! throws for invalid input.
//!
//! The scanner below follows V8's `src/json/json-parser.cc` step by step: it
//! stops at the same character, for the same reason, and formats the message
//! with the same templates (`src/common/message-template.h`). It validates the
//! input only; no values are built.
//!
//! Details that match V8:
//! - positions count UTF-16 code units, as JavaScript string indices do;
//! - line and column are 1-based; `\n`, `\r` and `\r\n` each end a line, and
//!   the column counts UTF-16 code units from the start of the line;
//! - JSON whitespace is space, tab, LF and CR only;
//! - the "Unexpected token" forms quote the whole input when it is shorter
//!   than 21 code units, and otherwise a window of 10 code units on either
//!   side of the bad character, with `...` where the input was cut.
//!
//! Lone surrogates, which V8 can put in a message by cutting a surrogate pair
//! in half, become U+FFFD, as they do when Node writes the message as UTF-8.

/// Number of UTF-16 code units V8 shows on each side of an unexpected token
/// (`JsonParser::kMaxContextCharacters`).
const MAX_CONTEXT_CHARACTERS: usize = 10;

/// Inputs shorter than this are quoted whole
/// (`JsonParser::kMinOriginalSourceLengthForContext`).
const MIN_ORIGINAL_SOURCE_LENGTH_FOR_CONTEXT: usize = MAX_CONTEXT_CHARACTERS * 2 + 1;

/// Returns the message (without the `SyntaxError: ` prefix) that Node 22's
/// `JSON.parse(text)` throws for `text`.
///
/// `text` is expected to be invalid JSON. In the rare case that V8 would
/// accept it (serde_json is stricter about a few things, such as nesting
/// depth, lone surrogate escapes and numbers out of range), this returns
/// V8's short form `"<text>" is not valid JSON`; use [`v8_json_error`] to tell
/// the two cases apart.
pub fn v8_parse_error(text: &str) -> String {
    v8_json_error(text).unwrap_or_else(|| format!("\"{text}\" is not valid JSON"))
}

/// Returns the message Node 22's `JSON.parse(text)` would throw, or `None`
/// when V8 would parse `text` without error.
pub fn v8_json_error(text: &str) -> Option<String> {
    let units: Vec<u16> = text.encode_utf16().collect();
    let mut parser = Parser {
        src: &units,
        cursor: 0,
    };
    parser
        .parse()
        .err()
        .map(|error| format_error(&units, error))
}

/// V8's `JsonToken`: what a single character can start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Number,
    String,
    LBrace,
    RBrace,
    LBrack,
    RBrack,
    True,
    False,
    Null,
    Whitespace,
    Colon,
    Comma,
    Illegal,
    Eos,
}

/// V8's `one_char_json_tokens` table; code units above Latin-1 are illegal.
fn token_for(c: u16) -> Token {
    match c {
        0x22 => Token::String,
        0x30..=0x39 | 0x2D => Token::Number,
        0x5B => Token::LBrack,
        0x7B => Token::LBrace,
        0x5D => Token::RBrack,
        0x7D => Token::RBrace,
        0x74 => Token::True,
        0x66 => Token::False,
        0x6E => Token::Null,
        0x20 | 0x09 | 0x0D | 0x0A => Token::Whitespace,
        0x3A => Token::Colon,
        0x2C => Token::Comma,
        _ => Token::Illegal,
    }
}

/// The fixed message templates V8 passes explicitly to `ReportUnexpectedToken`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Template {
    UnterminatedString,
    ExpectedPropNameOrRBrace,
    ExpectedCommaOrRBrack,
    ExpectedCommaOrRBrace,
    ExpectedDoubleQuotedPropertyName,
    ExponentPartMissingNumber,
    ExpectedColonAfterPropertyName,
    UnterminatedFractionalNumber,
    UnexpectedNonWhiteSpaceCharacter,
    BadEscapedCharacter,
    BadControlCharacter,
    BadUnicodeEscape,
    NoNumberAfterMinusSign,
}

impl Template {
    /// The template's text before " in JSON at position ..." / " after JSON ...".
    fn text(self) -> &'static str {
        match self {
            Template::UnterminatedString => "Unterminated string in JSON",
            Template::ExpectedPropNameOrRBrace => "Expected property name or '}' in JSON",
            Template::ExpectedCommaOrRBrack => "Expected ',' or ']' after array element in JSON",
            Template::ExpectedCommaOrRBrace => "Expected ',' or '}' after property value in JSON",
            Template::ExpectedDoubleQuotedPropertyName => {
                "Expected double-quoted property name in JSON"
            }
            Template::ExponentPartMissingNumber => "Exponent part is missing a number in JSON",
            Template::ExpectedColonAfterPropertyName => "Expected ':' after property name in JSON",
            Template::UnterminatedFractionalNumber => "Unterminated fractional number in JSON",
            Template::UnexpectedNonWhiteSpaceCharacter => {
                "Unexpected non-whitespace character after JSON"
            }
            Template::BadEscapedCharacter => "Bad escaped character in JSON",
            Template::BadControlCharacter => "Bad control character in string literal in JSON",
            Template::BadUnicodeEscape => "Bad Unicode escape in JSON",
            Template::NoNumberAfterMinusSign => "No number after minus sign in JSON",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorKind {
    /// An explicit template, used whatever the token at the position is.
    Template(Template),
    /// No explicit template: V8's `LookUpErrorMessageForJsonToken`.
    Token(Token),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ParseError {
    /// Position of the error in UTF-16 code units.
    pos: usize,
    kind: ErrorKind,
}

#[derive(Clone, Copy)]
enum Container {
    Object,
    Array,
}

struct Parser<'a> {
    src: &'a [u16],
    cursor: usize,
}

impl Parser<'_> {
    fn current(&self) -> Option<u16> {
        self.src.get(self.cursor).copied()
    }

    fn fail<T>(&self, kind: ErrorKind) -> Result<T, ParseError> {
        Err(ParseError {
            pos: self.cursor,
            kind,
        })
    }

    fn fail_template<T>(&self, template: Template) -> Result<T, ParseError> {
        self.fail(ErrorKind::Template(template))
    }

    /// V8's `ReportUnexpectedCharacter(CurrentCharacter())`.
    fn fail_unexpected_character<T>(&self) -> Result<T, ParseError> {
        let token = self.current().map_or(Token::Eos, token_for);
        self.fail(ErrorKind::Token(token))
    }

    /// Skips whitespace and returns the token at the cursor (V8's
    /// `GetNextNonWhitespaceToken` followed by `peek`).
    fn next_token(&mut self) -> Token {
        while let Some(c) = self.current() {
            let token = token_for(c);
            if token != Token::Whitespace {
                return token;
            }
            self.cursor += 1;
        }
        Token::Eos
    }

    /// V8's `Check(token)`.
    fn check(&mut self, token: Token) -> bool {
        if self.next_token() == token {
            self.cursor += 1;
            true
        } else {
            false
        }
    }

    /// V8's `ExpectNext(token, template)`: the template is used even at the
    /// end of the input.
    fn expect_next(&mut self, token: Token, template: Template) -> Result<(), ParseError> {
        if self.check(token) {
            Ok(())
        } else {
            self.fail_template(template)
        }
    }

    /// V8's `ParseJson`: one value, then only whitespace.
    fn parse(&mut self) -> Result<(), ParseError> {
        let mut stack: Vec<Container> = Vec::new();
        loop {
            // Produce a value.
            match self.next_token() {
                Token::String => {
                    self.cursor += 1;
                    self.scan_string()?;
                }
                Token::Number => self.scan_number()?,
                Token::LBrace => {
                    self.cursor += 1;
                    if !self.check(Token::RBrace) {
                        self.expect_next(Token::String, Template::ExpectedPropNameOrRBrace)?;
                        self.scan_property_rest()?;
                        stack.push(Container::Object);
                        continue;
                    }
                }
                Token::LBrack => {
                    self.cursor += 1;
                    if !self.check(Token::RBrack) {
                        stack.push(Container::Array);
                        continue;
                    }
                }
                Token::True => self.scan_literal(b"true")?,
                Token::False => self.scan_literal(b"false")?,
                Token::Null => self.scan_literal(b"null")?,
                Token::Colon
                | Token::Comma
                | Token::Illegal
                | Token::RBrace
                | Token::RBrack
                | Token::Whitespace
                | Token::Eos => return self.fail_unexpected_character(),
            }

            // Consume the value: close finished containers, or move on to
            // the next member.
            loop {
                match stack.last() {
                    None => {
                        return if self.next_token() == Token::Eos {
                            Ok(())
                        } else {
                            self.fail_template(Template::UnexpectedNonWhiteSpaceCharacter)
                        };
                    }
                    Some(Container::Object) => {
                        if self.check(Token::Comma) {
                            self.expect_next(
                                Token::String,
                                Template::ExpectedDoubleQuotedPropertyName,
                            )?;
                            self.scan_property_rest()?;
                            break;
                        }
                        self.expect_next(Token::RBrace, Template::ExpectedCommaOrRBrace)?;
                    }
                    Some(Container::Array) => {
                        if self.check(Token::Comma) {
                            break;
                        }
                        self.expect_next(Token::RBrack, Template::ExpectedCommaOrRBrack)?;
                    }
                }
                stack.pop();
            }
        }
    }

    /// The rest of a property after its opening quote: the key and the colon.
    /// (V8's array-index fast path for keys rescans with `ScanJsonString`
    /// whenever it does not succeed, so errors come from the plain scan.)
    fn scan_property_rest(&mut self) -> Result<(), ParseError> {
        self.scan_string()?;
        self.expect_next(Token::Colon, Template::ExpectedColonAfterPropertyName)
    }

    /// V8's `ScanJsonString`; the cursor is just past the opening quote.
    fn scan_string(&mut self) -> Result<(), ParseError> {
        loop {
            let Some(c) = self.current() else {
                return self.fail_template(Template::UnterminatedString);
            };
            if c > 0xFF {
                self.cursor += 1;
                continue;
            }
            match c {
                0x22 => {
                    self.cursor += 1;
                    return Ok(());
                }
                0x5C => {
                    self.cursor += 1;
                    match self.current() {
                        None => return self.fail(ErrorKind::Token(Token::Eos)),
                        Some(e) if e > 0xFF => return self.fail(ErrorKind::Token(Token::Illegal)),
                        // " \ / b f n r t
                        Some(0x22 | 0x5C | 0x2F | 0x62 | 0x66 | 0x6E | 0x72 | 0x74) => {}
                        // u
                        Some(0x75) => {
                            for _ in 0..4 {
                                self.cursor += 1;
                                if !self.current().is_some_and(is_hex_digit) {
                                    return self.fail_template(Template::BadUnicodeEscape);
                                }
                            }
                        }
                        Some(_) => return self.fail_template(Template::BadEscapedCharacter),
                    }
                    self.cursor += 1;
                }
                0x00..=0x1F => return self.fail_template(Template::BadControlCharacter),
                _ => self.cursor += 1,
            }
        }
    }

    /// V8's `ParseJsonNumber`; the cursor is on `-` or a digit.
    fn scan_number(&mut self) -> Result<(), ParseError> {
        let negative = self.current() == Some(u16::from(b'-'));
        if negative {
            self.cursor += 1;
        }
        if self.current() == Some(u16::from(b'0')) {
            // A leading zero may only be followed by a fraction or exponent.
            self.cursor += 1;
            match self.current() {
                Some(c) if is_decimal_digit(c) => {
                    return self.fail(ErrorKind::Token(Token::Number));
                }
                Some(c) if is_number_part(c) => {}
                _ if !negative => return Ok(()),
                _ => {}
            }
        } else {
            let start = self.cursor;
            self.skip_decimal_digits();
            if self.cursor == start {
                return self.fail_template(Template::NoNumberAfterMinusSign);
            }
        }

        if self.current() == Some(u16::from(b'.')) {
            self.cursor += 1;
            if !self.current().is_some_and(is_decimal_digit) {
                return self.fail_template(Template::UnterminatedFractionalNumber);
            }
            self.skip_decimal_digits();
        }

        if self.current().is_some_and(|c| c | 0x20 == u16::from(b'e')) {
            self.cursor += 1;
            if matches!(self.current(), Some(0x2B | 0x2D)) {
                self.cursor += 1;
            }
            if !self.current().is_some_and(is_decimal_digit) {
                return self.fail_template(Template::ExponentPartMissingNumber);
            }
            self.skip_decimal_digits();
        }
        Ok(())
    }

    fn skip_decimal_digits(&mut self) {
        while self.current().is_some_and(is_decimal_digit) {
            self.cursor += 1;
        }
    }

    /// V8's `ScanLiteral`; the cursor is on the literal's first character,
    /// which is known to match.
    fn scan_literal(&mut self, literal: &[u8]) -> Result<(), ParseError> {
        let remaining = self.src.len() - self.cursor;
        let matches = |(unit, byte): (&u16, &u8)| *unit == u16::from(*byte);
        if remaining >= literal.len()
            && self.src[self.cursor..self.cursor + literal.len()]
                .iter()
                .zip(literal)
                .all(matches)
        {
            self.cursor += literal.len();
            return Ok(());
        }
        self.cursor += 1;
        for &expected in &literal[1..literal.len().min(remaining)] {
            if self.src[self.cursor] != u16::from(expected) {
                return self.fail_unexpected_character();
            }
            self.cursor += 1;
        }
        self.fail(ErrorKind::Token(Token::Eos))
    }
}

fn is_decimal_digit(c: u16) -> bool {
    (0x30..=0x39).contains(&c)
}

fn is_hex_digit(c: u16) -> bool {
    is_decimal_digit(c) || (0x41..=0x46).contains(&c) || (0x61..=0x66).contains(&c)
}

/// V8's `IsNumberPart`: `.`, `e`, `E`, a digit, `-` or `+`.
fn is_number_part(c: u16) -> bool {
    matches!(c, 0x2E | 0x65 | 0x45 | 0x2D | 0x2B) || is_decimal_digit(c)
}

/// V8's `CalculateFileLocation`: 1-based line and column of `pos`.
fn line_and_column(src: &[u16], pos: usize) -> (usize, usize) {
    const CR: u16 = 0x0D;
    const LF: u16 = 0x0A;
    let mut line = 1;
    let mut line_start = 0;
    let mut i = 0;
    while i < pos {
        if src[i] == CR && i + 1 < pos && src[i + 1] == LF {
            i += 1;
        }
        if src[i] == CR || src[i] == LF {
            line += 1;
            line_start = i + 1;
        }
        i += 1;
    }
    (line, 1 + i - line_start)
}

fn format_error(src: &[u16], error: ParseError) -> String {
    let pos = error.pos;
    let at_position = || {
        let (line, column) = line_and_column(src, pos);
        format!("at position {pos} (line {line} column {column})")
    };
    match error.kind {
        ErrorKind::Template(template) => format!("{} {}", template.text(), at_position()),
        ErrorKind::Token(Token::Eos) => "Unexpected end of JSON input".to_string(),
        ErrorKind::Token(Token::Number) => format!("Unexpected number in JSON {}", at_position()),
        ErrorKind::Token(Token::String) => format!("Unexpected string in JSON {}", at_position()),
        ErrorKind::Token(_) => unexpected_token_message(src, pos),
    }
}

/// V8's `IsSpecialString`: inputs that are usually a stringified JS value.
fn is_special_string(src: &[u16]) -> bool {
    ["[object Object]", "undefined", "Infinity", "NaN"]
        .iter()
        .any(|special| src.iter().copied().eq(special.encode_utf16()))
}

/// The "Unexpected token" forms (`LookUpErrorMessageForJsonToken` and
/// `GetErrorMessageWithEllipses`).
fn unexpected_token_message(src: &[u16], pos: usize) -> String {
    let text = |range: std::ops::Range<usize>| String::from_utf16_lossy(&src[range]);
    if is_special_string(src) {
        return format!("\"{}\" is not valid JSON", text(0..src.len()));
    }
    let token = text(pos..pos + 1);
    let len = src.len();
    if len < MIN_ORIGINAL_SOURCE_LENGTH_FOR_CONTEXT {
        return format!(
            "Unexpected token '{token}', \"{}\" is not valid JSON",
            text(0..len)
        );
    }
    if pos < MAX_CONTEXT_CHARACTERS {
        format!(
            "Unexpected token '{token}', \"{}\"... is not valid JSON",
            text(0..pos + MAX_CONTEXT_CHARACTERS)
        )
    } else if pos < len - MAX_CONTEXT_CHARACTERS {
        format!(
            "Unexpected token '{token}', ...\"{}\"... is not valid JSON",
            text(pos - MAX_CONTEXT_CHARACTERS..pos + MAX_CONTEXT_CHARACTERS)
        )
    } else {
        format!(
            "Unexpected token '{token}', ...\"{}\" is not valid JSON",
            text(pos - MAX_CONTEXT_CHARACTERS..len)
        )
    }
}

#[cfg(test)]
mod tests {
    //! Every expected message below was recorded from Node v22.23.5
    //! (V8 12.4.254.21) with `JSON.parse(input)`; a lone surrogate in a
    //! message is shown as U+FFFD.

    use super::*;

    fn check(cases: &[(&str, &str)]) {
        for (input, expected) in cases {
            assert_eq!(v8_parse_error(input), *expected, "input: {input:?}");
        }
    }

    #[test]
    fn recorded_examples() {
        check(&[
            ("{not json", "Expected property name or '}' in JSON at position 1 (line 1 column 2)"),
            ("", "Unexpected end of JSON input"),
            ("   ", "Unexpected end of JSON input"),
            ("{\"id\": \"t1\", \"type\": \"get_state\"", "Expected ',' or '}' after property value in JSON at position 32 (line 1 column 33)"),
        ]);
    }

    #[test]
    fn unexpected_end_of_input() {
        check(&[
            ("[", "Unexpected end of JSON input"),
            ("[1,", "Unexpected end of JSON input"),
            ("{\"a\":", "Unexpected end of JSON input"),
            ("tru", "Unexpected end of JSON input"),
            ("nul", "Unexpected end of JSON input"),
            ("\"\\", "Unexpected end of JSON input"),
            (" \t\r\n", "Unexpected end of JSON input"),
        ]);
    }

    #[test]
    fn expected_property_name_or_rbrace() {
        check(&[
            (
                "{",
                "Expected property name or '}' in JSON at position 1 (line 1 column 2)",
            ),
            (
                "{1:2}",
                "Expected property name or '}' in JSON at position 1 (line 1 column 2)",
            ),
            (
                "\n\n  {x",
                "Expected property name or '}' in JSON at position 5 (line 3 column 4)",
            ),
            (
                "\r\n{x",
                "Expected property name or '}' in JSON at position 3 (line 2 column 2)",
            ),
            (
                "\r\r{x",
                "Expected property name or '}' in JSON at position 3 (line 3 column 2)",
            ),
            (
                "\n\r{x",
                "Expected property name or '}' in JSON at position 3 (line 3 column 2)",
            ),
        ]);
    }

    #[test]
    fn expected_comma_or_rbrace() {
        check(&[
            ("{\"a\":1 \"b\":2}", "Expected ',' or '}' after property value in JSON at position 7 (line 1 column 8)"),
            ("{\"a\":{\"b\":1]}", "Expected ',' or '}' after property value in JSON at position 11 (line 1 column 12)"),
            ("{\"a\":1\n\n]", "Expected ',' or '}' after property value in JSON at position 8 (line 3 column 1)"),
        ]);
    }

    #[test]
    fn expected_comma_or_rbrack() {
        check(&[
            (
                "[1",
                "Expected ',' or ']' after array element in JSON at position 2 (line 1 column 3)",
            ),
            (
                "[1 2]",
                "Expected ',' or ']' after array element in JSON at position 3 (line 1 column 4)",
            ),
            (
                "{\"a\":[1,2}",
                "Expected ',' or ']' after array element in JSON at position 9 (line 1 column 10)",
            ),
            (
                "[\"a\" \"b\"]",
                "Expected ',' or ']' after array element in JSON at position 5 (line 1 column 6)",
            ),
            (
                "[0",
                "Expected ',' or ']' after array element in JSON at position 2 (line 1 column 3)",
            ),
        ]);
    }

    #[test]
    fn expected_colon_after_property_name() {
        check(&[
            (
                "{\"a\"",
                "Expected ':' after property name in JSON at position 4 (line 1 column 5)",
            ),
            (
                "{\"a\" 1}",
                "Expected ':' after property name in JSON at position 5 (line 1 column 6)",
            ),
            (
                "{\"0\" 1}",
                "Expected ':' after property name in JSON at position 5 (line 1 column 6)",
            ),
            (
                "{\"a\":1,\"b\"}",
                "Expected ':' after property name in JSON at position 10 (line 1 column 11)",
            ),
            (
                "{\"a\":1,\"b\" 2}",
                "Expected ':' after property name in JSON at position 11 (line 1 column 12)",
            ),
            (
                "{\"a\"\n:\n1\n,\n\"b\"\n}",
                "Expected ':' after property name in JSON at position 15 (line 6 column 1)",
            ),
        ]);
    }

    #[test]
    fn expected_double_quoted_property_name() {
        check(&[
            (
                "{\"a\":1,}",
                "Expected double-quoted property name in JSON at position 7 (line 1 column 8)",
            ),
            (
                "{\"a\":1,",
                "Expected double-quoted property name in JSON at position 7 (line 1 column 8)",
            ),
            (
                "{\"a\":1, b:2}",
                "Expected double-quoted property name in JSON at position 8 (line 1 column 9)",
            ),
        ]);
    }

    #[test]
    fn unterminated_string() {
        check(&[
            (
                "\"abc",
                "Unterminated string in JSON at position 4 (line 1 column 5)",
            ),
            (
                "{\"a",
                "Unterminated string in JSON at position 3 (line 1 column 4)",
            ),
            (
                "[\"é😀",
                "Unterminated string in JSON at position 5 (line 1 column 6)",
            ),
        ]);
    }

    #[test]
    fn bad_control_character() {
        check(&[
            (
                "\"a\u{1}\"",
                "Bad control character in string literal in JSON at position 2 (line 1 column 3)",
            ),
            (
                "\"\t\"",
                "Bad control character in string literal in JSON at position 1 (line 1 column 2)",
            ),
            (
                "\"abc\n\"",
                "Bad control character in string literal in JSON at position 4 (line 1 column 5)",
            ),
            (
                "{\"k\":\"v\u{1f}\"}",
                "Bad control character in string literal in JSON at position 7 (line 1 column 8)",
            ),
        ]);
    }

    #[test]
    fn bad_escaped_character() {
        check(&[
            (
                "\"a\\x\"",
                "Bad escaped character in JSON at position 3 (line 1 column 4)",
            ),
            (
                "\"\\é\"",
                "Bad escaped character in JSON at position 2 (line 1 column 3)",
            ),
            (
                "\"\\\u{1}\"",
                "Bad escaped character in JSON at position 2 (line 1 column 3)",
            ),
            (
                "{\"a\":\"😀\\q\"}",
                "Bad escaped character in JSON at position 9 (line 1 column 10)",
            ),
        ]);
    }

    #[test]
    fn bad_unicode_escape() {
        check(&[
            (
                "\"a\\u12g4\"",
                "Bad Unicode escape in JSON at position 6 (line 1 column 7)",
            ),
            (
                "\"\\u00\"",
                "Bad Unicode escape in JSON at position 5 (line 1 column 6)",
            ),
            (
                "\"\\u",
                "Bad Unicode escape in JSON at position 3 (line 1 column 4)",
            ),
            (
                "{\"1\\u00",
                "Bad Unicode escape in JSON at position 7 (line 1 column 8)",
            ),
        ]);
    }

    #[test]
    fn no_number_after_minus_sign() {
        check(&[
            (
                "-",
                "No number after minus sign in JSON at position 1 (line 1 column 2)",
            ),
            (
                "-a",
                "No number after minus sign in JSON at position 1 (line 1 column 2)",
            ),
            (
                "{\"a\":-}",
                "No number after minus sign in JSON at position 6 (line 1 column 7)",
            ),
            (
                "[-",
                "No number after minus sign in JSON at position 2 (line 1 column 3)",
            ),
        ]);
    }

    #[test]
    fn exponent_part_missing_number() {
        check(&[
            (
                "1e",
                "Exponent part is missing a number in JSON at position 2 (line 1 column 3)",
            ),
            (
                "1E-",
                "Exponent part is missing a number in JSON at position 3 (line 1 column 4)",
            ),
            (
                "1.5e",
                "Exponent part is missing a number in JSON at position 4 (line 1 column 5)",
            ),
            (
                "[1e+]",
                "Exponent part is missing a number in JSON at position 4 (line 1 column 5)",
            ),
        ]);
    }

    #[test]
    fn unterminated_fractional_number() {
        check(&[
            (
                "1.",
                "Unterminated fractional number in JSON at position 2 (line 1 column 3)",
            ),
            (
                "1.e",
                "Unterminated fractional number in JSON at position 2 (line 1 column 3)",
            ),
            (
                "-0.x",
                "Unterminated fractional number in JSON at position 3 (line 1 column 4)",
            ),
        ]);
    }

    #[test]
    fn non_whitespace_after_json() {
        check(&[
            (
                "{ }x",
                "Unexpected non-whitespace character after JSON at position 3 (line 1 column 4)",
            ),
            (
                "1 2",
                "Unexpected non-whitespace character after JSON at position 2 (line 1 column 3)",
            ),
            (
                "{\"a\":1}x",
                "Unexpected non-whitespace character after JSON at position 7 (line 1 column 8)",
            ),
            (
                "{\"😀\":1} 1",
                "Unexpected non-whitespace character after JSON at position 9 (line 1 column 10)",
            ),
            (
                "0-",
                "Unexpected non-whitespace character after JSON at position 1 (line 1 column 2)",
            ),
            (
                "1.5x",
                "Unexpected non-whitespace character after JSON at position 3 (line 1 column 4)",
            ),
            (
                "\"x\" \"y\"",
                "Unexpected non-whitespace character after JSON at position 4 (line 1 column 5)",
            ),
            (
                "true false",
                "Unexpected non-whitespace character after JSON at position 5 (line 1 column 6)",
            ),
            (
                "{\"a\":1}\u{a0}",
                "Unexpected non-whitespace character after JSON at position 7 (line 1 column 8)",
            ),
            (
                "[]\r\n\r\n]",
                "Unexpected non-whitespace character after JSON at position 6 (line 3 column 1)",
            ),
        ]);
    }

    #[test]
    fn unexpected_number_or_string() {
        check(&[
            (
                "01",
                "Unexpected number in JSON at position 1 (line 1 column 2)",
            ),
            (
                "-01",
                "Unexpected number in JSON at position 2 (line 1 column 3)",
            ),
            (
                "[01]",
                "Unexpected number in JSON at position 2 (line 1 column 3)",
            ),
            (
                "tr1",
                "Unexpected number in JSON at position 2 (line 1 column 3)",
            ),
            (
                "t\"",
                "Unexpected string in JSON at position 1 (line 1 column 2)",
            ),
        ]);
    }

    #[test]
    fn unexpected_token_short() {
        check(&[
            ("abc", "Unexpected token 'a', \"abc\" is not valid JSON"),
            ("trux", "Unexpected token 'x', \"trux\" is not valid JSON"),
            ("[tru]", "Unexpected token ']', \"[tru]\" is not valid JSON"),
            ("[1,]", "Unexpected token ']', \"[1,]\" is not valid JSON"),
            ("]", "Unexpected token ']', \"]\" is not valid JSON"),
            ("[,]", "Unexpected token ',', \"[,]\" is not valid JSON"),
            ("t ", "Unexpected token ' ', \"t \" is not valid JSON"),
            ("é", "Unexpected token 'é', \"é\" is not valid JSON"),
            (
                "😀",
                "Unexpected token '\u{fffd}', \"😀\" is not valid JSON",
            ),
            (
                "\"\\😀\"",
                "Unexpected token '\u{fffd}', \"\"\\😀\"\" is not valid JSON",
            ),
            (
                "[\u{b}]",
                "Unexpected token '\u{b}', \"[\u{b}]\" is not valid JSON",
            ),
            (
                "{\"a\":1,\"b\":x}",
                "Unexpected token 'x', \"{\"a\":1,\"b\":x}\" is not valid JSON",
            ),
            (
                "  \r\n  x",
                "Unexpected token 'x', \"  \r\n  x\" is not valid JSON",
            ),
        ]);
    }

    #[test]
    fn special_strings() {
        check(&[
            ("undefined", "\"undefined\" is not valid JSON"),
            ("NaN", "\"NaN\" is not valid JSON"),
            ("Infinity", "\"Infinity\" is not valid JSON"),
            ("[object Object]", "\"[object Object]\" is not valid JSON"),
        ]);
    }

    #[test]
    fn unexpected_token_with_context() {
        check(&[
            (
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "Unexpected token 'a', \"aaaaaaaaaa\"... is not valid JSON",
            ),
            (
                "xyyyyyyyyyyyyyyyyyyy",
                "Unexpected token 'x', \"xyyyyyyyyyyyyyyyyyyy\" is not valid JSON",
            ),
            (
                "xyyyyyyyyyyyyyyyyyyyy",
                "Unexpected token 'x', \"xyyyyyyyyy\"... is not valid JSON",
            ),
            (
                "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,x,16,17,18,19,20]",
                "Unexpected token 'x', ...\",13,14,15,x,16,17,18\"... is not valid JSON",
            ),
            (
                "[1,2,3,4,5,6,7,8,9,10,11,12,x]",
                "Unexpected token 'x', ...\",10,11,12,x]\" is not valid JSON",
            ),
            (
                "[1,2,3,4,5,6,7,8,9,x,1,2,3,4,5,6,7,8,9]",
                "Unexpected token 'x', ...\"5,6,7,8,9,x,1,2,3,4,\"... is not valid JSON",
            ),
            (
                "[1,2,3,4,5,6,7,8,x,1,2,3,4,5,6,7,8,9,10]",
                "Unexpected token 'x', ...\"4,5,6,7,8,x,1,2,3,4,\"... is not valid JSON",
            ),
            (
                "[1,2,3,4,5,6,7,8,9,10,😀]",
                "Unexpected token '\u{fffd}', ...\",7,8,9,10,😀]\" is not valid JSON",
            ),
            (
                "[\"😀😀😀😀😀😀\",x,\"😀😀😀😀😀😀\"]",
                "Unexpected token 'x', ...\"😀😀😀😀\",x,\"😀😀😀\u{fffd}\"... is not valid JSON",
            ),
            (
                "{\"id\": \"t1\", \"type\": get_state}",
                "Unexpected token 'g', ...\", \"type\": get_state}\" is not valid JSON",
            ),
        ]);
    }

    #[test]
    fn deep_nesting_does_not_overflow_the_stack() {
        let open = "[".repeat(100_000);
        assert_eq!(v8_parse_error(&open), "Unexpected end of JSON input");
        // serde_json stops at depth 128; V8 accepts this.
        let closed = format!("{open}{}", "]".repeat(100_000));
        assert_eq!(v8_json_error(&closed), None);
    }

    #[test]
    fn input_v8_accepts() {
        for input in [
            "1e400",
            "\"\\ud800\"",
            "-0",
            " {\"a\": [1, 2.5e-3, true, null]} ",
        ] {
            assert_eq!(v8_json_error(input), None, "input: {input:?}");
        }
        assert_eq!(v8_parse_error("1e400"), "\"1e400\" is not valid JSON");
    }
}
