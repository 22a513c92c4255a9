//! ZooKeeper's wire format (jute) for the two bulk requests on the ZooKeeper store's hot paths,
//! and the loops that drive them, with no Python object per partition:
//!
//! - bulk writes: `multi` requests of items (one or more ops each, applied together), each multi
//!   starting with `check(/controller_epoch, version)` when fenced, chunked under the ops and
//!   byte limits; a multi fails as a whole, so the item whose op failed gets the failure and the
//!   other items of that multi are sent again (the semantics of `ZooKeeperStore._multi`). Two
//!   kinds: conditional partition-state writes (`setData`), and the creation of new partitions'
//!   state znodes with their parents (`create`, Kafka's order);
//! - partition-state reads: `multiRead` requests (ZooKeeper 3.6+) of `getData` ops.
//!
//! Sending is the caller's: an `exchange` closure takes request bodies and returns the response
//! bodies, in order (the Python store pipelines them on its kazoo connection). Requests here are
//! complete (they end with the multi's end marker); responses are read past ZooKeeper's reply
//! header.

use std::fmt;

/// ZooKeeper's request types.
pub const MULTI: i32 = 14;
pub const MULTI_READ: i32 = 22;
const OP_CREATE: i32 = 1;
const OP_GET_DATA: i32 = 4;
const OP_SET_DATA: i32 = 5;
const OP_CHECK: i32 = 13;
const OP_ERROR: i32 = -1;

/// ZooKeeper's error codes (`KeeperException.Code`) that the loops tell apart.
pub const OK: i32 = 0;
pub const RUNTIME_INCONSISTENCY: i32 = -2;
pub const NO_NODE: i32 = -101;
pub const NODE_EXISTS: i32 = -110;
pub const BAD_VERSION: i32 = -103;

/// The per-op overhead the server adds when it logs a multi as a transaction (the store's
/// `_TXN_SLACK`): chunks are sized so that the logged transaction also fits `jute.maxbuffer`.
pub const TXN_SLACK: usize = 8;

const HEADER: usize = 9; // op type, done flag, error
const STAT: usize = 68;
const STAT_VERSION: usize = 32; // czxid, mzxid, ctime, mtime, then version
const END: [u8; HEADER] = [0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff];

/// A response that does not parse as the request's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed ZooKeeper response: {}", self.0)
    }
}

fn header(out: &mut Vec<u8>, op: i32) {
    out.extend_from_slice(&op.to_be_bytes());
    out.push(0);
    out.extend_from_slice(&(-1i32).to_be_bytes());
}

fn buffer(out: &mut Vec<u8>, bytes: &[u8]) {
    // Paths and states are far below 2 GiB; the store refuses anything over jute.maxbuffer.
    out.extend_from_slice(&i32::try_from(bytes.len()).unwrap_or(i32::MAX).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// `check(path, version)` as an op of a multi.
pub fn check_op(path: &str, version: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + 8 + path.len());
    header(&mut out, OP_CHECK);
    buffer(&mut out, path.as_bytes());
    out.extend_from_slice(&version.to_be_bytes());
    out
}

/// `setData(path, data, version)` as an op of a multi.
pub fn set_op(out: &mut Vec<u8>, path: &str, data: &[u8], version: i32) {
    header(out, OP_SET_DATA);
    buffer(out, path.as_bytes());
    buffer(out, data);
    out.extend_from_slice(&version.to_be_bytes());
}

/// `create(path, data, acl, persistent)` as an op of a multi; `acl` is the jute-encoded ACL list.
pub fn create_op(out: &mut Vec<u8>, path: &str, data: &[u8], acl: &[u8]) {
    header(out, OP_CREATE);
    buffer(out, path.as_bytes());
    buffer(out, data);
    out.extend_from_slice(acl);
    out.extend_from_slice(&0i32.to_be_bytes());
}

/// The limits of one request.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Operations per multi (the fence check included).
    pub max_ops: usize,
    /// Bytes of ops per request (`jute.maxbuffer` less the request's own overhead).
    pub max_bytes: usize,
    /// Reads per multiRead.
    pub max_reads: usize,
}

/// One request to send: its body and the path its errors are named after.
pub struct Request {
    pub body: Vec<u8>,
    pub path: String,
}

/// One conditional write: the full path (chroot included), the data, the expected version.
pub struct SetItem {
    pub path: String,
    pub data: Vec<u8>,
    pub version: i32,
}

/// One item of a bulk write: its ops encoded, how many, and the full path its errors as a request
/// are named after when the multis are not fenced.
pub struct Item {
    pub wire: Vec<u8>,
    pub ops: usize,
    pub path: String,
}

/// What became of one item: its ops' results, or which of its ops failed with ZooKeeper's code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ItemOutcome {
    Applied(Vec<OpResult>),
    Failed(usize, i32),
}

/// What became of one write: its new version, or ZooKeeper's error code for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOutcome {
    Written(i32),
    Failed(i32),
}

/// Why a bulk operation stopped.
#[derive(Debug)]
pub enum BulkError<E> {
    /// The fence check failed with this code: the controller moved.
    Fenced(i32),
    /// One item alone is over the byte limit (index, its size).
    TooLarge(usize, usize),
    Wire(WireError),
    /// The exchange failed (the session ended, a request was refused …).
    Exchange(E),
}

impl<E> From<WireError> for BulkError<E> {
    fn from(e: WireError) -> Self {
        BulkError::Wire(e)
    }
}

/// One op's result in a multi's response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpResult {
    Check,
    Create,
    Set { version: i32 },
    Error(i32),
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.buf.len())
            .ok_or_else(|| {
                WireError(format!(
                    "truncated at byte {} of {}",
                    self.at,
                    self.buf.len()
                ))
            })?;
        let slice = &self.buf[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn int(&mut self) -> Result<i32, WireError> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    /// An op header: (type, done, error).
    fn header(&mut self) -> Result<(i32, bool, i32), WireError> {
        let op = self.int()?;
        let done = self.take(1)?[0] != 0;
        let err = self.int()?;
        Ok((op, done, err))
    }

    /// A jute buffer: None for null (-1); any other negative length is corrupt.
    fn buffer(&mut self) -> Result<Option<&'a [u8]>, WireError> {
        match self.int()? {
            -1 => Ok(None),
            length => {
                let n = usize::try_from(length).map_err(|_| {
                    WireError(format!("a length of {length} at byte {}", self.at - 4))
                })?;
                Ok(Some(self.take(n)?))
            }
        }
    }

    fn stat_version(&mut self) -> Result<i32, WireError> {
        let stat = self.take(STAT)?;
        let v = &stat[STAT_VERSION..STAT_VERSION + 4];
        Ok(i32::from_be_bytes([v[0], v[1], v[2], v[3]]))
    }
}

/// The results of a multi or multiRead: `one` reads a result of the given op type, or returns
/// None for an op type the request did not contain.
fn decode_results<T>(
    buf: &[u8],
    what: &str,
    mut one: impl FnMut(i32, &mut Reader<'_>) -> Result<Option<T>, WireError>,
) -> Result<Vec<T>, WireError> {
    let mut r = Reader { buf, at: 0 };
    let mut results = Vec::new();
    loop {
        let (op, done, _) = r.header()?;
        if done {
            return Ok(results);
        }
        match one(op, &mut r)? {
            Some(result) => results.push(result),
            None => {
                return Err(WireError(format!(
                    "unexpected op type {op} in {what}'s results"
                )))
            }
        }
    }
}

/// The results of a multi made of check, create and setData ops.
pub fn decode_multi(buf: &[u8]) -> Result<Vec<OpResult>, WireError> {
    decode_results(buf, "a multi", |op, r| {
        Ok(match op {
            OP_CHECK => Some(OpResult::Check),
            OP_CREATE => {
                r.buffer()?; // the created path
                Some(OpResult::Create)
            }
            OP_SET_DATA => Some(OpResult::Set {
                version: r.stat_version()?,
            }),
            OP_ERROR => Some(OpResult::Error(r.int()?)),
            _ => None,
        })
    })
}

/// One getData's result in a multiRead's response: the data (None for a null buffer) and the
/// znode's data version, or ZooKeeper's error code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataRead {
    Found(Option<Vec<u8>>, i32),
    Failed(i32),
}

/// The results of a multiRead made of getData ops.
pub fn decode_multi_read(buf: &[u8]) -> Result<Vec<DataRead>, WireError> {
    decode_results(buf, "a multiRead", |op, r| {
        Ok(match op {
            OP_GET_DATA => {
                let data = r.buffer()?.map(<[u8]>::to_vec);
                Some(DataRead::Found(data, r.stat_version()?))
            }
            OP_ERROR => Some(DataRead::Failed(r.int()?)),
            _ => None,
        })
    })
}

/// A multiRead of getData on each path.
pub fn multi_read_body(paths: &[String]) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(paths.iter().map(|p| HEADER + 5 + p.len()).sum::<usize>() + HEADER);
    for path in paths {
        header(&mut out, OP_GET_DATA);
        buffer(&mut out, path.as_bytes());
        out.push(0); // no watch
    }
    out.extend_from_slice(&END);
    out
}

/// Read every path's data and version, `limits.max_reads` per multiRead, all requests in one
/// exchange.
pub fn read_all<E>(
    paths: &[String],
    limits: Limits,
    exchange: &mut impl FnMut(i32, Vec<Request>) -> Result<Vec<Vec<u8>>, E>,
) -> Result<Vec<DataRead>, BulkError<E>> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let per_request = limits.max_reads.max(1);
    let chunks: Vec<&[String]> = paths.chunks(per_request).collect();
    let requests = chunks
        .iter()
        .map(|chunk| Request {
            body: multi_read_body(chunk),
            path: chunk[0].clone(),
        })
        .collect();
    let responses = exchange(MULTI_READ, requests).map_err(BulkError::Exchange)?;
    let mut reads = Vec::with_capacity(paths.len());
    for (chunk, response) in chunks.iter().zip(&responses) {
        let decoded = decode_multi_read(response)?;
        if decoded.len() != chunk.len() {
            return Err(WireError(format!(
                "{} results for {} reads",
                decoded.len(),
                chunk.len()
            ))
            .into());
        }
        reads.extend(decoded);
    }
    if reads.len() != paths.len() {
        return Err(WireError(format!(
            "{} responses for {} requests",
            responses.len(),
            chunks.len()
        ))
        .into());
    }
    Ok(reads)
}

/// Apply every item, fenced by `fence` (`(path of /controller_epoch, version)`) when given: all
/// multis of a round in one exchange, then the innocent items of failed multis again, until every
/// item has its outcome. With no items, a fenced call still sends the check alone, so a deposed
/// controller learns it.
pub fn apply_items<E>(
    items: &[Item],
    fence: Option<(&str, i32)>,
    limits: Limits,
    exchange: &mut impl FnMut(i32, Vec<Request>) -> Result<Vec<Vec<u8>>, E>,
) -> Result<Vec<ItemOutcome>, BulkError<E>> {
    let check = fence.map(|(path, version)| check_op(path, version));
    let check_ops = usize::from(check.is_some());
    let head: &[u8] = check.as_deref().unwrap_or(&[]);
    let mut outcomes: Vec<Option<ItemOutcome>> = vec![None; items.len()];
    let mut todo: Vec<usize> = (0..items.len()).collect();
    if todo.is_empty() {
        if let Some((path, _)) = fence {
            let mut body = head.to_vec();
            body.extend_from_slice(&END);
            let responses = exchange(
                MULTI,
                vec![Request {
                    body,
                    path: path.to_owned(),
                }],
            )
            .map_err(BulkError::Exchange)?;
            let results = decode_multi(responses.first().map_or(&[][..], Vec::as_slice))?;
            if let Some(code) = first_failure(&results).map(|(_, code)| code) {
                return Err(BulkError::Fenced(code));
            }
        }
        return Ok(Vec::new());
    }
    while !todo.is_empty() {
        let chunks = chunk(&todo, items, check_ops, head.len(), limits)?;
        let requests = chunks
            .iter()
            .map(|chunk| {
                let size = head.len() + chunk.iter().map(|&i| items[i].wire.len()).sum::<usize>();
                let mut body = Vec::with_capacity(size + HEADER);
                body.extend_from_slice(head);
                for &i in chunk {
                    body.extend_from_slice(&items[i].wire);
                }
                body.extend_from_slice(&END);
                let path = match fence {
                    Some((path, _)) => path.to_owned(),
                    None => items[chunk[0]].path.clone(),
                };
                Request { body, path }
            })
            .collect();
        let responses = exchange(MULTI, requests).map_err(BulkError::Exchange)?;
        if responses.len() != chunks.len() {
            return Err(WireError(format!(
                "{} responses for {} multis",
                responses.len(),
                chunks.len()
            ))
            .into());
        }
        let mut retry = Vec::new();
        for (chunk, response) in chunks.iter().zip(&responses) {
            let results = decode_multi(response)?;
            let ops = check_ops + chunk.iter().map(|&i| items[i].ops).sum::<usize>();
            if results.len() != ops {
                return Err(WireError(format!("{} results for {ops} ops", results.len())).into());
            }
            let failed = first_failure(&results);
            if let Some((_, code)) = failed.filter(|&(at, _)| at < check_ops) {
                return Err(BulkError::Fenced(code));
            }
            let mut position = check_ops;
            for &i in chunk {
                let count = items[i].ops;
                outcomes[i] = match failed {
                    None => Some(ItemOutcome::Applied(
                        results[position..position + count].to_vec(),
                    )),
                    Some((at, code)) if (position..position + count).contains(&at) => {
                        Some(ItemOutcome::Failed(at - position, code))
                    }
                    Some(_) => {
                        retry.push(i);
                        None
                    }
                };
                position += count;
            }
        }
        todo = retry;
    }
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or(ItemOutcome::Failed(0, RUNTIME_INCONSISTENCY)))
        .collect())
}

/// Conditionally write every item (see [`apply_items`]).
pub fn conditional_sets<E>(
    items: &[SetItem],
    fence: Option<(&str, i32)>,
    limits: Limits,
    exchange: &mut impl FnMut(i32, Vec<Request>) -> Result<Vec<Vec<u8>>, E>,
) -> Result<Vec<SetOutcome>, BulkError<E>> {
    let wires: Vec<Item> = items
        .iter()
        .map(|item| {
            let mut wire = Vec::with_capacity(HEADER + 12 + item.path.len() + item.data.len());
            set_op(&mut wire, &item.path, &item.data, item.version);
            Item {
                wire,
                ops: 1,
                path: item.path.clone(),
            }
        })
        .collect();
    apply_items(&wires, fence, limits, &mut *exchange)?
        .into_iter()
        .map(|outcome| match outcome {
            ItemOutcome::Applied(results) => match results[..] {
                [OpResult::Set { version }] => Ok(SetOutcome::Written(version)),
                _ => Err(WireError(format!("{results:?} answers a setData")).into()),
            },
            ItemOutcome::Failed(_, code) => Ok(SetOutcome::Failed(code)),
        })
        .collect()
}

/// One partition state to create (full paths): its data, and its `/partitions/<p>` parent when
/// that is to be created too (in the same item, first: Kafka's order).
pub struct CreateItem {
    pub parent: Option<String>,
    pub path: String,
    pub data: Vec<u8>,
}

/// Why a create failed: whether at the parent (else at the state), and ZooKeeper's code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreateFailure {
    pub at_parent: bool,
    pub code: i32,
}

/// Create every item's znodes with `acl` (jute-encoded), fenced as [`apply_items`]; an item whose
/// parent turns out to exist (created meanwhile) is created again without it. Per item, None
/// when created.
pub fn create_states<E>(
    items: &[CreateItem],
    acl: &[u8],
    fence: Option<(&str, i32)>,
    limits: Limits,
    exchange: &mut impl FnMut(i32, Vec<Request>) -> Result<Vec<Vec<u8>>, E>,
) -> Result<Vec<Option<CreateFailure>>, BulkError<E>> {
    let mut outcomes = vec![None; items.len()];
    let mut pending: Vec<(usize, bool)> = items
        .iter()
        .enumerate()
        .map(|(i, item)| (i, item.parent.is_some()))
        .collect();
    while !pending.is_empty() {
        let wires: Vec<Item> = pending
            .iter()
            .map(|&(i, with_parent)| {
                let item = &items[i];
                let parent = item.parent.as_deref().filter(|_| with_parent);
                let mut wire = Vec::with_capacity(
                    2 * (HEADER + 12 + acl.len() + item.path.len()) + item.data.len(),
                );
                if let Some(parent) = parent {
                    create_op(&mut wire, parent, &[], acl);
                }
                create_op(&mut wire, &item.path, &item.data, acl);
                Item {
                    wire,
                    ops: 1 + usize::from(parent.is_some()),
                    path: parent.unwrap_or(&item.path).to_owned(),
                }
            })
            .collect();
        let mut retry = Vec::new();
        let applied = apply_items(&wires, fence, limits, &mut *exchange).map_err(|e| match e {
            BulkError::TooLarge(at, size) => BulkError::TooLarge(pending[at].0, size),
            e => e,
        })?;
        for (&(i, with_parent), outcome) in pending.iter().zip(applied) {
            match outcome {
                ItemOutcome::Applied(results) => {
                    if let Some(other) = results.iter().find(|r| **r != OpResult::Create) {
                        return Err(WireError(format!("{other:?} answers a create")).into());
                    }
                }
                ItemOutcome::Failed(0, NODE_EXISTS) if with_parent => retry.push((i, false)),
                ItemOutcome::Failed(op, code) => {
                    outcomes[i] = Some(CreateFailure {
                        at_parent: with_parent && op == 0,
                        code,
                    });
                }
            }
        }
        pending = retry;
    }
    Ok(outcomes)
}

/// The op that made a multi fail, and its code: ZooKeeper reports OK for the ops before it and
/// RUNTIMEINCONSISTENCY for those after.
fn first_failure(results: &[OpResult]) -> Option<(usize, i32)> {
    results.iter().enumerate().find_map(|(at, r)| match *r {
        OpResult::Error(code) if code != OK && code != RUNTIME_INCONSISTENCY => Some((at, code)),
        _ => None,
    })
}

/// The items of `todo` in runs that each fit one multi (`ZooKeeperStore._chunks`).
fn chunk<E>(
    todo: &[usize],
    items: &[Item],
    base_ops: usize,
    base_size: usize,
    limits: Limits,
) -> Result<Vec<Vec<usize>>, BulkError<E>> {
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let (mut ops, mut size) = (base_ops, base_size + TXN_SLACK * base_ops);
    for &i in todo {
        let count = items[i].ops;
        let item_size = items[i].wire.len() + TXN_SLACK * count;
        if base_size + item_size > limits.max_bytes {
            return Err(BulkError::TooLarge(i, item_size));
        }
        if !current.is_empty()
            && (ops + count > limits.max_ops || size + item_size > limits.max_bytes)
        {
            chunks.push(std::mem::take(&mut current));
            ops = base_ops;
            size = base_size + TXN_SLACK * base_ops;
        }
        current.push(i);
        ops += count;
        size += item_size;
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    Ok(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_result(version: i32) -> Vec<u8> {
        let mut out = Vec::new();
        header(&mut out, OP_SET_DATA);
        let mut stat = [0u8; STAT];
        stat[STAT_VERSION..STAT_VERSION + 4].copy_from_slice(&version.to_be_bytes());
        out.extend_from_slice(&stat);
        out
    }

    fn error_result(code: i32) -> Vec<u8> {
        let mut out = Vec::new();
        header(&mut out, OP_ERROR);
        out.extend_from_slice(&code.to_be_bytes());
        out
    }

    fn check_result() -> Vec<u8> {
        let mut out = Vec::new();
        header(&mut out, OP_CHECK);
        out
    }

    /// A server holding a version per path, applying multis as ZooKeeper does.
    struct Server {
        versions: Vec<(String, i32)>,
        epoch_version: i32,
        multis: Vec<usize>,
    }

    impl Server {
        fn parse_ops(body: &[u8]) -> Vec<(i32, String, i32)> {
            let mut r = Reader { buf: body, at: 0 };
            let mut ops = Vec::new();
            loop {
                let (op, done, _) = r.header().unwrap();
                if done {
                    return ops;
                }
                let len = usize::try_from(r.int().unwrap()).unwrap();
                let path = String::from_utf8(r.take(len).unwrap().to_vec()).unwrap();
                if op == OP_SET_DATA {
                    let len = usize::try_from(r.int().unwrap()).unwrap();
                    r.take(len).unwrap();
                }
                ops.push((op, path, r.int().unwrap()));
            }
        }

        fn apply(&mut self, body: &[u8]) -> Vec<u8> {
            let ops = Self::parse_ops(body);
            self.multis.push(ops.len());
            let failure = ops.iter().position(|(op, path, version)| {
                if *op == OP_CHECK {
                    *version != self.epoch_version
                } else {
                    match self.versions.iter().find(|(p, _)| p == path) {
                        Some((_, v)) => *version != -1 && version != v,
                        None => true,
                    }
                }
            });
            let mut out = Vec::new();
            for (n, (op, path, _)) in ops.iter().enumerate() {
                match failure {
                    Some(at) if n < at => out.extend(error_result(OK)),
                    Some(at) if n == at => {
                        let known = self.versions.iter().any(|(p, _)| p == path);
                        let code = if *op == OP_CHECK || known {
                            BAD_VERSION
                        } else {
                            NO_NODE
                        };
                        out.extend(error_result(code));
                    }
                    Some(_) => out.extend(error_result(RUNTIME_INCONSISTENCY)),
                    None if *op == OP_CHECK => out.extend(check_result()),
                    None => {
                        let entry = self.versions.iter_mut().find(|(p, _)| p == path).unwrap();
                        entry.1 += 1;
                        out.extend(set_result(entry.1));
                    }
                }
            }
            out.extend_from_slice(&END);
            out
        }
    }

    fn server(n: usize) -> Server {
        Server {
            versions: (0..n).map(|i| (format!("/p/{i}"), 0)).collect(),
            epoch_version: 3,
            multis: Vec::new(),
        }
    }

    fn items(n: usize, version: i32) -> Vec<SetItem> {
        (0..n)
            .map(|i| SetItem {
                path: format!("/p/{i}"),
                data: b"{}".to_vec(),
                version,
            })
            .collect()
    }

    const LIMITS: Limits = Limits {
        max_ops: 4,
        max_bytes: 1 << 20,
        max_reads: 2,
    };

    #[test]
    fn writes_are_chunked_fenced_and_report_each_item() {
        let mut zk = server(10);
        zk.versions[4].1 = 7; // changed meanwhile: BADVERSION
        let mut todo = items(12, 0); // 10 and 11 do not exist
        todo[11].version = -1;
        let outcomes = conditional_sets(
            &todo,
            Some(("/controller_epoch", 3)),
            LIMITS,
            &mut |kind, requests| {
                assert_eq!(kind, MULTI);
                Ok::<_, ()>(requests.iter().map(|r| zk.apply(&r.body)).collect())
            },
        )
        .unwrap();
        let mut expected: Vec<SetOutcome> = (0..10).map(|_| SetOutcome::Written(1)).collect();
        expected[4] = SetOutcome::Failed(BAD_VERSION);
        expected.extend([SetOutcome::Failed(NO_NODE), SetOutcome::Failed(NO_NODE)]);
        assert_eq!(outcomes, expected);
        assert!(zk.multis.iter().all(|&ops| ops <= 4));
    }

    /// A server of znodes (paths) applying multis of creates as ZooKeeper does: all or none, a
    /// create failing when its node exists or its parent does not.
    struct Tree {
        nodes: Vec<String>,
        multis: Vec<usize>,
    }

    impl Tree {
        fn apply(&mut self, body: &[u8], acl: &[u8]) -> Vec<u8> {
            let mut r = Reader { buf: body, at: 0 };
            let mut ops = Vec::new();
            loop {
                let (op, done, _) = r.header().unwrap();
                if done {
                    break;
                }
                let path = String::from_utf8(r.buffer().unwrap().unwrap().to_vec()).unwrap();
                if op == OP_CREATE {
                    r.buffer().unwrap();
                    assert_eq!(r.take(acl.len()).unwrap(), acl);
                    assert_eq!(r.int().unwrap(), 0); // persistent
                } else {
                    r.int().unwrap(); // the check's version: always right here
                }
                ops.push((op, path));
            }
            self.multis.push(ops.len());
            let mut staged = self.nodes.clone();
            let mut failure = None;
            for (n, (op, path)) in ops.iter().enumerate() {
                if *op != OP_CREATE {
                    continue;
                }
                let parent = &path[..path.rfind('/').unwrap()];
                if staged.contains(path) {
                    failure = Some((n, NODE_EXISTS));
                } else if !staged.iter().any(|p| p.as_str() == parent) {
                    failure = Some((n, NO_NODE));
                } else {
                    staged.push(path.clone());
                    continue;
                }
                break;
            }
            let mut out = Vec::new();
            for (n, (op, path)) in ops.iter().enumerate() {
                match failure {
                    Some((at, code)) if n == at => out.extend(error_result(code)),
                    Some((at, _)) => out.extend(error_result(if n < at {
                        OK
                    } else {
                        RUNTIME_INCONSISTENCY
                    })),
                    None if *op == OP_CHECK => out.extend(check_result()),
                    None => {
                        header(&mut out, OP_CREATE);
                        buffer(&mut out, path.as_bytes());
                    }
                }
            }
            if failure.is_none() {
                self.nodes = staged;
            }
            out.extend_from_slice(&END);
            out
        }
    }

    #[test]
    fn creates_go_in_kafkas_order_parents_first_and_report_each_item() {
        let acl = [
            0, 0, 0, 1, 0, 0, 0, 31, 0, 0, 0, 5, b'w', b'o', b'r', b'l', b'd', 0, 0, 0, 6, b'a',
            b'n', b'y', b'o', b'n', b'e',
        ];
        let mut zk = Tree {
            nodes: [
                "/t",
                "/t/partitions",
                "/t/partitions/1",
                "/t/partitions/2",
                "/t/partitions/2/state",
            ]
            .map(String::from)
            .to_vec(),
            multis: Vec::new(),
        };
        let item = |topic: &str, p: usize, parent: bool| CreateItem {
            parent: parent.then(|| format!("/{topic}/partitions/{p}")),
            path: format!("/{topic}/partitions/{p}/state"),
            data: b"{}".to_vec(),
        };
        // 1's parent exists (created meanwhile), 2's state too, u has no /partitions.
        let todo = [
            item("t", 0, true),
            item("t", 1, true),
            item("t", 2, false),
            item("u", 0, true),
            item("t", 3, true),
        ];
        let outcomes = create_states(
            &todo,
            &acl,
            Some(("/controller_epoch", 3)),
            LIMITS,
            &mut |kind, requests| {
                assert_eq!(kind, MULTI);
                Ok::<_, ()>(requests.iter().map(|r| zk.apply(&r.body, &acl)).collect())
            },
        )
        .unwrap();
        assert_eq!(
            outcomes,
            vec![
                None,
                None,
                Some(CreateFailure {
                    at_parent: false,
                    code: NODE_EXISTS
                }),
                Some(CreateFailure {
                    at_parent: true,
                    code: NO_NODE
                }),
                None
            ]
        );
        for path in [
            "/t/partitions/0/state",
            "/t/partitions/1/state",
            "/t/partitions/3/state",
        ] {
            assert!(zk.nodes.iter().any(|n| n.as_str() == path), "{path}");
        }
        // The check and one item of two ops fill a multi of at most 4 ops.
        assert!(zk.multis.iter().all(|&ops| ops <= 4));
        let fenced = create_states(
            &todo[..1],
            &acl,
            Some(("/controller_epoch", 3)),
            LIMITS,
            &mut |_, requests| {
                Ok::<_, ()>(
                    requests
                        .iter()
                        .map(|_| {
                            let mut out = error_result(BAD_VERSION);
                            out.extend(error_result(RUNTIME_INCONSISTENCY));
                            out.extend(error_result(RUNTIME_INCONSISTENCY));
                            out.extend_from_slice(&END);
                            out
                        })
                        .collect(),
                )
            },
        );
        assert!(matches!(fenced, Err(BulkError::Fenced(BAD_VERSION))));
    }

    #[test]
    fn a_failed_fence_stops_everything_even_with_nothing_to_write() {
        for n in [0, 5] {
            let mut zk = server(5);
            let result = conditional_sets(
                &items(n, 0),
                Some(("/controller_epoch", 2)),
                LIMITS,
                &mut |_, requests| {
                    Ok::<_, ()>(requests.iter().map(|r| zk.apply(&r.body)).collect())
                },
            );
            assert!(matches!(result, Err(BulkError::Fenced(BAD_VERSION))), "{n}");
            assert!(zk.versions.iter().all(|(_, v)| *v == 0));
        }
    }

    #[test]
    fn unfenced_writes_and_byte_limits() {
        let mut zk = server(6);
        let limits = Limits {
            max_ops: 100,
            max_bytes: 60,
            max_reads: 1,
        };
        let outcomes = conditional_sets(&items(6, 0), None, limits, &mut |_, requests| {
            Ok::<_, ()>(requests.iter().map(|r| zk.apply(&r.body)).collect())
        })
        .unwrap();
        assert_eq!(outcomes, vec![SetOutcome::Written(1); 6]);
        assert_eq!(zk.multis, vec![1; 6]); // each set is 27 bytes + 8 of slack: one per multi
        let tiny = Limits {
            max_bytes: 20,
            ..limits
        };
        let refused =
            conditional_sets(
                &items(1, 0),
                None,
                tiny,
                &mut |_, _| Ok::<_, ()>(Vec::new()),
            );
        assert!(matches!(refused, Err(BulkError::TooLarge(0, _))));
    }

    #[test]
    fn reads_decode_data_versions_and_errors() {
        let paths: Vec<String> = (0..3).map(|i| format!("/p/{i}")).collect();
        let reads = read_all(&paths, LIMITS, &mut |kind, requests| {
            assert_eq!(kind, MULTI_READ);
            Ok::<_, ()>(
                requests
                    .iter()
                    .map(|r| {
                        let mut out = Vec::new();
                        let count = r.body.windows(3).filter(|w| *w == b"/p/").count();
                        for n in 0..count {
                            if r.path == "/p/2" {
                                out.extend(error_result(NO_NODE));
                                continue;
                            }
                            header(&mut out, OP_GET_DATA);
                            if n == 0 {
                                buffer(&mut out, b"{}");
                            } else {
                                out.extend_from_slice(&(-1i32).to_be_bytes());
                            }
                            let mut stat = [0u8; STAT];
                            stat[STAT_VERSION + 3] = 5;
                            out.extend_from_slice(&stat);
                        }
                        out.extend_from_slice(&END);
                        out
                    })
                    .collect(),
            )
        })
        .unwrap();
        assert_eq!(
            reads,
            vec![
                DataRead::Found(Some(b"{}".to_vec()), 5),
                DataRead::Found(None, 5),
                DataRead::Failed(NO_NODE)
            ]
        );
        assert!(decode_multi_read(&[0, 0]).is_err());
    }

    fn get_data_result(length: i32, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        header(&mut out, OP_GET_DATA);
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(&[0u8; STAT]);
        out
    }

    #[test]
    fn hostile_replies_are_errors_bounded_by_their_size() {
        let ended = |mut reply: Vec<u8>| {
            reply.extend_from_slice(&END);
            reply
        };
        // Lengths the reply cannot hold: 2 GiB announced, a negative length other than null's -1.
        assert!(decode_multi_read(&ended(get_data_result(i32::MAX, b"{}"))).is_err());
        assert!(decode_multi_read(&ended(get_data_result(-5, b""))).is_err());
        assert_eq!(
            decode_multi_read(&ended(get_data_result(-1, b""))),
            Ok(vec![DataRead::Found(None, 0)])
        );
        // No end marker, a stat cut short, an op type the request did not contain.
        assert!(decode_multi_read(&get_data_result(2, b"{}")).is_err());
        assert!(decode_multi(&set_result(1)[..HEADER + STAT - 1]).is_err());
        assert!(decode_multi(&ended(get_data_result(2, b"{}"))).is_err());
        assert!(decode_multi_read(&ended(set_result(1))).is_err());
        // Results for more ops than were sent are refused by the loops, whatever the server says.
        let many = ended((0..5).flat_map(|_| error_result(NO_NODE)).collect());
        let paths: Vec<String> = (0..2).map(|i| format!("/p/{i}")).collect();
        let read = read_all(&paths, LIMITS, &mut |_, requests| {
            Ok::<_, ()>(requests.iter().map(|_| many.clone()).collect())
        });
        assert!(matches!(read, Err(BulkError::Wire(_))));
        let written = conditional_sets(&items(2, 0), None, LIMITS, &mut |_, requests| {
            Ok::<_, ()>(requests.iter().map(|_| many.clone()).collect())
        });
        assert!(matches!(written, Err(BulkError::Wire(_))));
    }

    #[test]
    fn random_replies_never_panic_and_yield_at_most_one_result_per_header() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64; // xorshift: the same replies on every run
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let seeds = [
            get_data_result(2, b"{}"),
            error_result(NO_NODE),
            set_result(3),
            check_result(),
            {
                let mut created = Vec::new();
                header(&mut created, OP_CREATE);
                buffer(&mut created, b"/p/0");
                created
            },
            END.to_vec(),
        ];
        for _ in 0..20_000 {
            let mut reply = Vec::new();
            for _ in 0..next() % 6 {
                let seed = &seeds[(next() % seeds.len() as u64) as usize];
                reply.extend_from_slice(seed);
            }
            for _ in 0..next() % 4 {
                if !reply.is_empty() {
                    let at = (next() % reply.len() as u64) as usize;
                    reply[at] = next() as u8;
                }
            }
            if next() % 4 == 0 {
                reply.truncate((next() % (reply.len() as u64 + 1)) as usize);
            }
            let bound = reply.len() / HEADER;
            if let Ok(results) = decode_multi_read(&reply) {
                assert!(results.len() <= bound);
            }
            if let Ok(results) = decode_multi(&reply) {
                assert!(results.len() <= bound);
            }
            let _ = crate::zkjson::decode_partition_state(&reply);
        }
    }
}
