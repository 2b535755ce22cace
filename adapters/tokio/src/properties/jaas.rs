//! The one part of a Java `sasl.jaas.config` line this client needs: the credentials.
//!
//! `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice"
//! password="…";` — a login module class, a flag, `key=value` options (quoted with `\"`
//! escapes, or bare), and a `;`.

/// What a `sasl.jaas.config` line says about credentials.
#[derive(Default)]
pub(super) struct Jaas {
    pub(super) username: Option<String>,
    pub(super) password: Option<String>,
}

/// Parses `some.LoginModule required key="value" …;` (one module, as Kafka requires). The
/// class is not checked: `sasl.mechanism` says the mechanism. Errors say what is wrong
/// without quoting anything: the line holds a password.
pub(super) fn parse_jaas(text: &str) -> Result<Jaas, &'static str> {
    let mut rest = text.trim_start();
    if take_word(&mut rest).is_empty() {
        return Err("expected `LoginModuleClass required key=\"value\" …;`");
    }
    if !["required", "requisite", "sufficient", "optional"].iter().any(|f| f.eq_ignore_ascii_case(take_word(&mut rest)))
    {
        return Err("expected `required` (or requisite, sufficient, optional) after the login module class");
    }
    let mut jaas = Jaas::default();
    loop {
        if let Some(tail) = rest.strip_prefix(';') {
            return match tail.trim().is_empty() {
                true => Ok(jaas),
                false => Err("only one login module is supported, and nothing may follow its `;`"),
            };
        }
        if rest.is_empty() {
            return Err("missing the `;` that ends the login module");
        }
        let key = take_word(&mut rest);
        rest = rest.strip_prefix('=').ok_or("expected key=\"value\" options after the flag")?.trim_start();
        let value = match rest.strip_prefix('"') {
            Some(quoted) => {
                let mut value = String::new();
                let mut chars = quoted.char_indices();
                loop {
                    match chars.next() {
                        Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                        Some((i, '"')) => {
                            rest = quoted[i + 1..].trim_start();
                            break value;
                        }
                        Some((_, c)) => value.push(c),
                        None => return Err("a quoted value is not closed"),
                    }
                }
            }
            None => {
                let end = rest.find(|c: char| c.is_whitespace() || c == ';').unwrap_or(rest.len());
                let (value, tail) = rest.split_at(end);
                rest = tail.trim_start();
                value.to_string()
            }
        };
        match key {
            "username" => jaas.username = Some(value),
            "password" => jaas.password = Some(value),
            _ => {}
        }
    }
}

/// The next word of a JAAS line (up to whitespace, `;` or `=`), and the rest after it.
fn take_word<'a>(rest: &mut &'a str) -> &'a str {
    let end = rest.find(|c: char| c.is_whitespace() || c == ';' || c == '=').unwrap_or(rest.len());
    let (word, tail) = rest.split_at(end);
    *rest = tail.trim_start();
    word
}
