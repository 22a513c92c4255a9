//! Kafka's JSON for partition-state znodes, byte for byte (`kctl.stores.zkdata` has the single
//! encoder and the decoders): the ZooKeeper store's bulk writes encode thousands at once, and its
//! bulk reads decode the usual document here (anything else goes to `zkdata`'s decoder).

use std::fmt::Write;

use crate::model::{BrokerId, LeaderRecoveryState};

/// One state to encode: leader, ISR, leader epoch, recovery state, controller epoch.
pub type StateFields<'a> = (BrokerId, &'a [BrokerId], i32, LeaderRecoveryState, i32);

/// `{"controller_epoch":..,"leader":..,"version":1,"leader_epoch":..,"isr":[..]}`, Kafka's key
/// order, with `"leader_recovery_state":1` last only when recovering (Kafka 3.2+).
pub fn partition_state(
    (leader, isr, leader_epoch, recovery, controller_epoch): StateFields<'_>,
) -> String {
    let mut out = String::with_capacity(80 + 4 * isr.len());
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        r#"{{"controller_epoch":{controller_epoch},"leader":{leader},"version":1,"leader_epoch":{leader_epoch},"isr":["#
    );
    for (i, broker) in isr.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{broker}");
    }
    out.push(']');
    if recovery == LeaderRecoveryState::Recovering {
        out.push_str(r#","leader_recovery_state":1"#);
    }
    out.push('}');
    out
}

/// What a usual state document holds: leader, ISR, leader epoch, controller epoch.
pub type DecodedState = (BrokerId, Vec<BrokerId>, i32, i32);

/// The usual partition-state document: a JSON object whose keys are `controller_epoch`, `leader`,
/// `version`, `leader_epoch` and `isr` (any order, each once, no recovery state), with integers
/// (the ISR a list of them) that fit 32 bits. It is decoded exactly as
/// `TopicPartitionStateZNode.decode`'s fast path decodes it; `None` for anything else (other keys,
/// escapes, floats, a recovery state, corrupt data), which the caller hands to that decoder.
pub fn decode_partition_state(data: &[u8]) -> Option<DecodedState> {
    let (mut leader, mut isr, mut leader_epoch, mut controller_epoch, mut version) =
        (None, None, None, None, None);
    object_document(data, |p, key| {
        Some(match key {
            b"leader" => leader.replace(p.int()?).is_none(),
            b"leader_epoch" => leader_epoch.replace(p.int()?).is_none(),
            b"controller_epoch" => controller_epoch.replace(p.int()?).is_none(),
            b"version" => version.replace(p.int()?).is_none(),
            b"isr" => isr.replace(p.ints()?).is_none(),
            _ => return None,
        })
    })?;
    Some((leader?, isr?, leader_epoch?, controller_epoch?))
}

/// A JSON object that is the whole of `data`, the value of each key read by `field`, which
/// returns whether the key is new (None, or a key seen before, gives up: `json.loads` keeps the
/// last of duplicated keys, which is left to Python).
fn object_document<'a>(
    data: &'a [u8],
    mut field: impl FnMut(&mut Parser<'a>, &'a [u8]) -> Option<bool>,
) -> Option<()> {
    let mut p = Parser { data, at: 0 };
    p.expect(b'{')?;
    loop {
        let key = p.key()?;
        p.expect(b':')?;
        if !field(&mut p, key)? {
            return None;
        }
        match p.next()? {
            b',' => {}
            b'}' => break,
            _ => return None,
        }
    }
    p.skip_whitespace();
    (p.at == data.len()).then_some(())
}

/// What a usual topic document holds: its version, its topic id, its partition ids in ascending
/// order, and per partition the index of its replica list among the distinct lists (a topic's
/// partitions share a few lists, which Python makes into one object each).
pub type DecodedTopic = (i32, Option<String>, Vec<i32>, Vec<u32>, Vec<Vec<BrokerId>>);

/// The usual topic document (`/brokers/topics/<topic>`): a JSON object whose keys are `version`, an
/// optional `topic_id` (a string without escapes), `partitions` (at least one partition id, in
/// ascending order, each with a list of integers) and optionally `adding_replicas` and
/// `removing_replicas`, both empty (no reassignment in flight); each key once, every integer
/// within 32 bits. It is decoded exactly as `TopicZNode.decode` decodes it; `None` for anything
/// else (other keys or values, partitions out of order, escapes, corrupt data), which the caller
/// hands to that decoder.
pub fn decode_topic(data: &[u8]) -> Option<DecodedTopic> {
    let (mut version, mut topic_id, mut partitions) = (None, None, None);
    let (mut adding, mut removing) = (false, false);
    object_document(data, |p, key| {
        Some(match key {
            b"version" => version.replace(p.int()?).is_none(),
            b"topic_id" => topic_id.replace(p.string()?).is_none(),
            b"partitions" => partitions.replace(p.assignments()?).is_none(),
            b"adding_replicas" => !std::mem::replace(&mut adding, p.empty_object()?),
            b"removing_replicas" => !std::mem::replace(&mut removing, p.empty_object()?),
            _ => return None,
        })
    })?;
    let (ids, lists) = partitions?;
    let mut distinct: Vec<Vec<BrokerId>> = Vec::new();
    let mut index_of: crate::hash::HashMap<Vec<BrokerId>, u32> = Default::default();
    let indexes = lists
        .into_iter()
        .map(|list| {
            *index_of.entry(list).or_insert_with_key(|list| {
                distinct.push(list.clone());
                (distinct.len() - 1) as u32
            })
        })
        .collect();
    Some((version?, topic_id, ids, indexes, distinct))
}

struct Parser<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn skip_whitespace(&mut self) {
        while self.at < self.data.len()
            && matches!(self.data[self.at], b' ' | b'\t' | b'\n' | b'\r')
        {
            self.at += 1;
        }
    }

    /// The next non-whitespace byte, consumed.
    fn next(&mut self) -> Option<u8> {
        self.skip_whitespace();
        let byte = *self.data.get(self.at)?;
        self.at += 1;
        Some(byte)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// A key without escapes.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.at;
        let length = self.data[start..].iter().position(|&b| b == b'"')?;
        let key = &self.data[start..start + length];
        if key.contains(&b'\\') {
            return None;
        }
        self.at = start + length + 1;
        Some(key)
    }

    /// A JSON integer (no fraction or exponent) that fits 32 bits.
    fn int(&mut self) -> Option<i32> {
        self.skip_whitespace();
        let start = self.at;
        if self.data.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let digits = self.at;
        while self.data.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let count = self.at - digits;
        if count == 0 || count > 11 || (count > 1 && self.data[digits] == b'0') {
            return None; // no digits, too long, or a leading zero (not JSON)
        }
        if matches!(self.data.get(self.at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        std::str::from_utf8(&self.data[start..self.at])
            .ok()?
            .parse()
            .ok()
    }

    /// A string without escapes or control characters (not JSON), as UTF-8.
    fn string(&mut self) -> Option<String> {
        let text = self.key()?;
        if text.iter().any(|&b| b < 0x20) {
            return None;
        }
        String::from_utf8(text.to_vec()).ok()
    }

    /// `{}`: true.
    fn empty_object(&mut self) -> Option<bool> {
        self.expect(b'{')?;
        self.expect(b'}')?;
        Some(true)
    }

    /// A non-empty object of partition ids (`paths.parse_id`'s spelling) in ascending order, each
    /// with its replica list.
    #[allow(clippy::type_complexity)]
    fn assignments(&mut self) -> Option<(Vec<i32>, Vec<Vec<BrokerId>>)> {
        let (mut ids, mut lists) = (Vec::new(), Vec::new());
        self.expect(b'{')?;
        loop {
            let key = self.key()?;
            let digits = std::str::from_utf8(key).ok()?;
            if key.is_empty()
                || key.len() > 10
                || !key.iter().all(u8::is_ascii_digit)
                || (key.len() > 1 && key[0] == b'0')
            {
                return None;
            }
            let id: i32 = digits.parse().ok()?;
            if ids.last().is_some_and(|&last| last >= id) {
                return None; // out of order, or a duplicate
            }
            self.expect(b':')?;
            ids.push(id);
            lists.push(self.ints()?);
            match self.next()? {
                b',' => {}
                b'}' => return Some((ids, lists)),
                _ => return None,
            }
        }
    }

    fn ints(&mut self) -> Option<Vec<i32>> {
        self.expect(b'[')?;
        let mut values = Vec::new();
        self.skip_whitespace();
        if self.data.get(self.at) == Some(&b']') {
            self.at += 1;
            return Some(values);
        }
        loop {
            values.push(self.int()?);
            match self.next()? {
                b',' => {}
                b']' => return Some(values),
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_usual_topic_document_decodes_with_shared_replica_lists() {
        let kctl = br#"{"version":3,"topic_id":"AbC-_x","partitions":{"0":[1,2],"1":[2,3],"2":[1,2],"10":[]},"adding_replicas":{},"removing_replicas":{}}"#;
        assert_eq!(
            decode_topic(kctl),
            Some((
                3,
                Some("AbC-_x".to_owned()),
                vec![0, 1, 2, 10],
                vec![0, 1, 0, 2],
                vec![vec![1, 2], vec![2, 3], vec![]]
            ))
        );
        let spaced = b" { \"partitions\" : { \"7\" : [ -1 , 2147483647 ] } ,\n\"version\":1 } \r\n";
        assert_eq!(
            decode_topic(spaced),
            Some((1, None, vec![7], vec![0], vec![vec![-1, i32::MAX]]))
        );
    }

    #[test]
    fn any_other_topic_document_is_left_to_python() {
        for doc in [
            r#"{"version":3,"partitions":{"1":[1],"0":[2]}}"#, // out of order
            r#"{"version":3,"partitions":{"0":[1],"0":[2]}}"#, // duplicated partition
            r#"{"version":3,"partitions":{}}"#,
            r#"{"version":3,"partitions":{"01":[1]}}"#,
            r#"{"version":3,"partitions":{"2147483648":[1]}}"#,
            r#"{"version":3,"partitions":{"-1":[1]}}"#,
            r#"{"version":3,"partitions":{"0":[2147483648]}}"#,
            r#"{"version":3,"partitions":{"0":[1.0]}}"#,
            r#"{"version":3,"partitions":{"0":[true]}}"#,
            r#"{"version":3,"partitions":{"0":1}}"#,
            r#"{"version":3,"partitions":{"0":[1]},"adding_replicas":{"0":[3]}}"#,
            r#"{"version":3,"partitions":{"0":[1]},"removing_replicas":{"0":[1]}}"#,
            r#"{"version":3,"partitions":{"0":[1]},"removing_replicas":{},"removing_replicas":{}}"#,
            r#"{"version":3,"partitions":{"0":[1]},"other":1}"#,
            r#"{"version":3,"version":3,"partitions":{"0":[1]}}"#,
            r#"{"version":"3","partitions":{"0":[1]}}"#,
            r#"{"partitions":{"0":[1]}}"#,
            r#"{"version":3}"#,
            r#"{"version":3,"topic_id":null,"partitions":{"0":[1]}}"#,
            r#"{"version":3,"topic_id":"a\u0041","partitions":{"0":[1]}}"#,
            "{\"version\":3,\"topic_id\":\"a\tb\",\"partitions\":{\"0\":[1]}}",
            r#"{"version":3,"partitions":{"0":[1]}} x"#,
            r#"{"version":3,"partitions":{"0":[1]}"#,
            r#"[{"version":3,"partitions":{"0":[1]}}]"#,
        ] {
            assert_eq!(decode_topic(doc.as_bytes()), None, "{doc}");
        }
        assert_eq!(
            decode_topic(b"{\"version\":3,\"topic_id\":\"\xff\",\"partitions\":{\"0\":[1]}}"),
            None
        );
    }

    #[test]
    fn kafkas_bytes() {
        assert_eq!(
            partition_state((1, &[1, 2, 3], 5, LeaderRecoveryState::Recovered, 2)),
            r#"{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":5,"isr":[1,2,3]}"#
        );
        assert_eq!(
            partition_state((-1, &[4], 0, LeaderRecoveryState::Recovering, 1)),
            r#"{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":0,"isr":[4],"leader_recovery_state":1}"#
        );
    }

    #[test]
    fn usual_documents_decode_and_the_rest_is_left_to_python() {
        let kafka =
            br#"{"controller_epoch":2,"leader":1,"version":1,"leader_epoch":5,"isr":[1,2,3]}"#;
        assert_eq!(
            decode_partition_state(kafka),
            Some((1, vec![1, 2, 3], 5, 2))
        );
        let spaced =
            b" { \"isr\" : [ ] , \"leader\":-1,\"leader_epoch\":0,\n\"controller_epoch\":-0 } ";
        assert_eq!(decode_partition_state(spaced), Some((-1, vec![], 0, 0)));
        for other in [
            &br#"{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[4],"leader_recovery_state":1}"#[..],
            br#"{"controller_epoch":1,"leader":1,"leader_epoch":0}"#,
            br#"{"controller_epoch":1,"leader":1,"leader_epoch":0,"isr":[1],"leader":2}"#,
            br#"{"controller_epoch":1,"leader":1.0,"leader_epoch":0,"isr":[1]}"#,
            br#"{"controller_epoch":1,"leader":01,"leader_epoch":0,"isr":[1]}"#,
            br#"{"controller_epoch":1,"leader":1,"leader_epoch":0,"isr":[1,]}"#,
            br#"{"controller_epoch":1,"leader":1,"leader_epoch":0,"isr":[1]} x"#,
            br#"{"controller_epoch":1,"leader":3000000000,"leader_epoch":0,"isr":[1]}"#,
            br#"{"controller_epoch":1,"lea\u0064er":1,"leader_epoch":0,"isr":[1]}"#,
            br#"{"controller_epoch":1,"leader":true,"leader_epoch":0,"isr":[1]}"#,
            b"",
            b"\x00not JSON",
        ] {
            assert_eq!(decode_partition_state(other), None, "{}", String::from_utf8_lossy(other));
        }
    }

    #[test]
    fn hostile_documents_are_left_to_python_without_recursion_or_overflow() {
        let document = |isr: &str| {
            format!(
                r#"{{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":{isr}}}"#
            )
        };
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let long_key = format!(r#"{{"{}":1}}"#, "k".repeat(1_000_000));
        for hostile in [
            document(&deep),
            document(&format!("[{}]", "9".repeat(5000))),
            document("[99999999999]"),
            document("[-2147483649]"),
            long_key,
            "{".repeat(100_000),
        ] {
            assert_eq!(decode_partition_state(hostile.as_bytes()), None);
        }
        let wide = (0..100_000)
            .map(|b| b.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let decoded = decode_partition_state(document(&format!("[{wide}]")).as_bytes());
        assert_eq!(decoded.map(|(_, isr, _, _)| isr.len()), Some(100_000));
    }
}
