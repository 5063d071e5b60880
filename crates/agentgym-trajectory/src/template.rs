//! The chat template, rendered the way transformers renders it.
//!
//! transformers compiles templates with Jinja2 in a sandbox with `trim_blocks` and
//! `lstrip_blocks`, the loop-controls extension, its own `tojson`, and the globals
//! `raise_exception` and `strftime_now`; the special tokens of `tokenizer_config.json`
//! (`bos_token`, `eos_token`, ...) are passed as render variables. Token ids are only
//! correct if our render is byte-identical, so this module reproduces that environment on
//! minijinja (with Python string/dict methods from `minijinja-contrib`'s pycompat).
use std::collections::BTreeMap;

use minijinja::{context, Environment, ErrorKind, Value};

use crate::error::{describe, Error, Result};
use crate::{pyjson, strftime};

const TEMPLATE_NAME: &str = "chat_template";

/// Named special tokens handed to the template as variables (`bos_token` -> `"<s>"`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecialTokens {
    map: BTreeMap<String, String>,
}

impl SpecialTokens {
    pub fn new() -> Self {
        Self::default()
    }

    /// Set a token by its template variable name, e.g. `("eos_token", "<|im_end|>")`.
    pub fn with(mut self, name: &str, content: &str) -> Self {
        self.map.insert(name.to_string(), content.to_string());
        self
    }

    /// Read every `*_token` entry of a `tokenizer_config.json` (plain strings or
    /// `{"content": ...}` added-token objects).
    pub fn from_tokenizer_config(config: &serde_json::Value) -> Self {
        let mut out = Self::new();
        if let Some(obj) = config.as_object() {
            for (key, value) in obj {
                if !key.ends_with("_token") {
                    continue;
                }
                let content = value
                    .as_str()
                    .or_else(|| value.get("content").and_then(serde_json::Value::as_str));
                if let Some(content) = content {
                    out.map.insert(key.clone(), content.to_string());
                }
            }
        }
        out
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    pub fn bos(&self) -> Option<&str> {
        self.get("bos_token")
    }

    pub fn eos(&self) -> Option<&str> {
        self.get("eos_token")
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// A compiled chat template.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
}

impl ChatTemplate {
    /// Compile `source` with transformers' environment. `{% generation %}` blocks (used by
    /// transformers only to compute assistant masks) render their body unchanged.
    pub fn new(source: &str, special: &SpecialTokens) -> Result<Self> {
        let mut env = Environment::new();
        env.set_trim_blocks(true);
        env.set_lstrip_blocks(true);
        env.set_keep_trailing_newline(false);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", pyjson::tojson_filter);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime::strftime_now);
        for (name, content) in special.iter() {
            env.add_global(name.to_string(), content.to_string());
        }
        env.add_template_owned(TEMPLATE_NAME, rewrite_generation_tags(source))
            .map_err(|e| Error::TemplateSyntax(describe(&e)))?;
        Ok(ChatTemplate { env })
    }

    /// Render `messages` (a sequence value) like `apply_chat_template(tokenize=False)`.
    pub fn render(
        &self,
        messages: Value,
        tools: Option<&Value>,
        add_generation_prompt: bool,
    ) -> Result<String> {
        let template = self
            .env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| Error::render(&e))?;
        let ctx = context! {
            messages => messages,
            tools => tools.cloned().unwrap_or(Value::from(())),
            documents => Value::from(()),
            add_generation_prompt => add_generation_prompt,
        };
        template.render(ctx).map_err(|e| Error::render(&e))
    }
}

fn raise_exception(message: String) -> Result<String, minijinja::Error> {
    Err(minijinja::Error::new(ErrorKind::InvalidOperation, message))
}

/// Turn `{% generation %}` / `{% endgeneration %}` into `{% if true %}` / `{% endif %}`, keeping
/// the tag's whitespace-control markers, so the body renders once and trim/lstrip rules apply
/// exactly as they do to Jinja2's extension tag.
pub(crate) fn rewrite_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(open) = rest.find("{%") {
        out.push_str(&rest[..open]);
        let tag = &rest[open..];
        match tag.find("%}") {
            Some(close) => {
                let whole = &tag[..close + 2];
                out.push_str(&rewrite_tag(whole));
                rest = &tag[close + 2..];
            }
            None => {
                out.push_str(tag);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn rewrite_tag(tag: &str) -> String {
    let inner = &tag[2..tag.len() - 2];
    let lead = inner.chars().next().filter(|c| *c == '-' || *c == '+');
    let trail = inner.chars().last().filter(|c| *c == '-' || *c == '+');
    let start = lead.map_or(0, char::len_utf8);
    let end = inner.len() - trail.map_or(0, char::len_utf8);
    if start > end {
        return tag.to_string();
    }
    let replacement = match inner[start..end].trim() {
        "generation" => "if true",
        "endgeneration" => "endif",
        _ => return tag.to_string(),
    };
    let mut out = String::from("{%");
    out.extend(lead);
    out.push(' ');
    out.push_str(replacement);
    out.push(' ');
    out.extend(trail);
    out.push_str("%}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(src: &str, json: &str, agp: bool) -> Result<String> {
        let special = SpecialTokens::new()
            .with("bos_token", "<s>")
            .with("eos_token", "</s>");
        let t = ChatTemplate::new(src, &special)?;
        let v: serde_json::Value = serde_json::from_str(json).unwrap();
        t.render(Value::from_serialize(&v), None, agp)
    }

    #[test]
    fn trim_and_lstrip_blocks() {
        let src = "{{ bos_token }}\n{% for m in messages %}\n    {% if m.role == 'user' %}\nU:{{ m.content | trim }}\n    {% endif %}\n{% endfor %}\n{% if add_generation_prompt %}A:{% endif %}\n";
        let out = render(src, r#"[{"role":"user","content":" hi "}]"#, true).unwrap();
        assert_eq!(out, "<s>\nU:hi\nA:");
    }

    #[test]
    fn pycompat_methods_and_loop_controls() {
        let src = "{% for m in messages %}{% if m.content.startswith('skip') %}{% continue %}{% endif %}{{ m.content.strip().upper() }}|{{ m.content.split('</think>')[-1].lstrip() }};{% endfor %}";
        let out = render(
            src,
            r#"[{"content":"skip me"},{"content":" a</think> b "}]"#,
            false,
        )
        .unwrap();
        assert_eq!(out, "A</THINK> B|b ;");
    }

    #[test]
    fn generation_tags_are_transparent() {
        let src = "{% for m in messages %}{%- generation -%}\n  [{{ m.content }}]\n{%- endgeneration %}{% endfor %}";
        assert_eq!(render(src, r#"[{"content":"x"}]"#, false).unwrap(), "[x]");
        assert_eq!(
            rewrite_generation_tags("{%generation%}a{% endgeneration +%}"),
            "{% if true %}a{% endif +%}"
        );
    }

    #[test]
    fn raise_exception_is_a_render_error() {
        let err = render("{{ raise_exception('roles must alternate') }}", "[]", false).unwrap_err();
        assert!(
            matches!(&err, Error::TemplateRender(m) if m.contains("roles must alternate")),
            "{err}"
        );
        assert!(matches!(
            render("{% if %}", "[]", false),
            Err(Error::TemplateSyntax(_))
        ));
    }

    #[test]
    fn hf_tojson() {
        let out = render(
            "{{ messages[0] | tojson }} {{ messages[0] | tojson(indent=2) }}",
            r#"[{"b":"<é>","a":1.0}]"#,
            false,
        )
        .unwrap();
        assert_eq!(
            out,
            "{\"b\": \"<é>\", \"a\": 1.0} {\n  \"b\": \"<é>\",\n  \"a\": 1.0\n}"
        );
    }
}
