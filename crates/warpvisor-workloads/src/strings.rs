//! Strings: tokenize tweets, drop stop words and extract hashtags, JSON in and out (the
//! paper's Strings benchmark, `vectorvisor.md` Figures 12 and 13, in Rust).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::inputs::{self, Rng};
use crate::WorkloadError;

/// Tweets per request.
const TWEETS: usize = 100;

/// English stop words (NLTK's list).
const STOP_WORDS: &[&str] = &[
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "her",
    "hers",
    "herself",
    "it",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "will",
    "just",
    "don",
    "should",
    "now",
];

#[derive(Serialize, Deserialize)]
struct Payload {
    tweets: Vec<String>,
}

#[derive(Serialize)]
struct Response {
    tokenized: Vec<Vec<String>>,
    hashtags: Vec<Vec<String>>,
}

/// `{"tweets": [...]}` with 100 tweets.
pub fn request(rng: &mut Rng) -> Vec<u8> {
    let payload = Payload {
        tweets: (0..TWEETS).map(|_| inputs::tweet(rng)).collect(),
    };
    serde_json::to_vec(&payload).unwrap_or_default()
}

/// A token without surrounding punctuation, lower-cased (a leading `#` or `@` is kept).
fn normalize(token: &str) -> String {
    token
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '#' && c != '@')
        .to_lowercase()
}

/// Replies with `{"tokenized": [[...]], "hashtags": [[...]]}`: each tweet's words without stop
/// words, and each tweet's hashtags.
pub fn run(request: &[u8]) -> Result<Vec<u8>, WorkloadError> {
    let payload: Payload = serde_json::from_slice(request)
        .map_err(|e| WorkloadError::new(format!("expected {{\"tweets\": [...]}}: {e}")))?;
    let stop: HashSet<&str> = STOP_WORDS.iter().copied().collect();
    let tokenized: Vec<Vec<String>> = payload
        .tweets
        .iter()
        .map(|t| {
            t.split_whitespace()
                .map(normalize)
                .filter(|w| !w.is_empty() && !stop.contains(w.as_str()))
                .collect()
        })
        .collect();
    let hashtags = tokenized
        .iter()
        .map(|words| {
            words
                .iter()
                .filter(|w| w.len() > 1 && w.starts_with('#'))
                .cloned()
                .collect()
        })
        .collect();
    serde_json::to_vec(&Response {
        tokenized,
        hashtags,
    })
    .map_err(|e| WorkloadError::new(format!("writing the reply: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_go_and_hashtags_stay() {
        let request = br#"{"tweets": ["The GPU is FAST! #CUDA #rustlang", "I love it, too."]}"#;
        let reply = String::from_utf8(run(request).unwrap()).unwrap();
        assert_eq!(
            reply,
            r##"{"tokenized":[["gpu","fast","#cuda","#rustlang"],["love"]],"hashtags":[["#cuda","#rustlang"],[]]}"##
        );
        assert!(run(b"{}").is_err());
    }
}
