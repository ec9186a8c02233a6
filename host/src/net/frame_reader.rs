//! A client connection's read buffer that costs nothing while the client
//! is idle: it is allocated when bytes arrive (4 KiB), grows while reads
//! fill it (a pipelining client, up to 64 KiB), shrinks back when they do
//! not, and is released whenever it is empty and the socket has nothing
//! more. A fixed 64 KiB buffer per connection (tokio's `BufReader`, which
//! zeroes it) was most of an idle session's resident memory: 2,000 idle
//! sessions held 76 KB each.

use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};

/// The buffer's size when bytes first arrive, and its least.
const MIN: usize = 4 << 10;
/// The most the buffer grows to.
const MAX: usize = 64 << 10;

pub(super) struct FrameReader<R> {
    inner: R,
    /// Initialized bytes; `pos..end` are buffered and unread. Empty (no
    /// allocation) between bursts.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    /// The size the next allocation gets.
    cap: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(super) fn new(inner: R) -> Self {
        FrameReader {
            inner,
            buf: Vec::new(),
            pos: 0,
            end: 0,
            cap: MIN,
        }
    }

    /// The bytes read from the socket and not consumed yet.
    pub(super) fn buffer(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Marks `n` buffered bytes as read.
    pub(super) fn consume(&mut self, n: usize) {
        assert!(
            n <= self.end - self.pos,
            "consumed {n} bytes of {} buffered",
            self.end - self.pos
        );
        self.pos += n;
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
        }
    }

    /// Reads once from the socket into the (empty) buffer.
    fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        debug_assert_eq!(self.pos, self.end, "fill only an empty buffer");
        if self.buf.len() != self.cap {
            self.buf = vec![0; self.cap];
        }
        let mut rb = ReadBuf::new(&mut self.buf);
        match Pin::new(&mut self.inner).poll_read(cx, &mut rb) {
            Poll::Ready(Ok(())) => {
                let n = rb.filled().len();
                self.pos = 0;
                self.end = n;
                // A full read: more is likely waiting; a read of under a
                // quarter: the client is not pipelining (much) any more.
                if n == self.cap {
                    self.cap = (self.cap * 2).min(MAX);
                } else if n < self.cap / 4 {
                    self.cap = (self.cap / 2).max(MIN);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                // Idle: hold no buffer while waiting.
                self.buf = Vec::new();
                Poll::Pending
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for FrameReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let me = self.get_mut();
        if me.pos == me.end {
            // A large read (a big frame's payload) goes straight to the
            // caller's buffer.
            if out.remaining() >= me.cap {
                return Pin::new(&mut me.inner).poll_read(cx, out);
            }
            match me.poll_fill(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        let n = out.remaining().min(me.end - me.pos);
        out.put_slice(&me.buf[me.pos..me.pos + n]);
        me.consume(n);
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn frames_read_whole_through_small_and_large_reads_and_the_buffer_is_released_when_idle()
    {
        let (client, server) = tokio::io::duplex(1 << 20);
        let mut rd = FrameReader::new(server);
        let mut client = client;
        // Many small frames in one write, then a payload larger than the
        // buffer, then a pause.
        let mut sent = Vec::new();
        for i in 0..2000u32 {
            sent.extend(i.to_be_bytes());
        }
        let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        sent.extend(&big);
        client.write_all(&sent).await.unwrap();
        let mut got = Vec::new();
        for _ in 0..2000 {
            let mut head = [0u8; 4];
            rd.read_exact(&mut head).await.unwrap();
            got.extend(head);
            // What is buffered is what comes next.
            let buffered = rd.buffer().to_vec();
            assert!(sent[got.len()..].starts_with(&buffered));
        }
        let mut payload = vec![0u8; big.len()];
        rd.read_exact(&mut payload).await.unwrap();
        got.extend(&payload);
        assert_eq!(got, sent);
        assert!(rd.cap > MIN, "grew while reads filled it: {}", rd.cap);
        // Nothing more: the read waits, holding no buffer.
        let mut one = [0u8; 1];
        let idle = tokio::time::timeout(std::time::Duration::from_millis(50), rd.read(&mut one));
        assert!(idle.await.is_err(), "nothing to read");
        assert_eq!(rd.buf.capacity(), 0, "released while idle");
        client.write_all(b"x").await.unwrap();
        assert_eq!(rd.read(&mut one).await.unwrap(), 1);
        assert_eq!(&one, b"x");
    }

    #[tokio::test]
    async fn consume_takes_buffered_bytes_only() {
        let (mut client, server) = tokio::io::duplex(64);
        let mut rd = FrameReader::new(server);
        client.write_all(b"abcdef").await.unwrap();
        let mut a = [0u8; 1];
        rd.read_exact(&mut a).await.unwrap();
        assert_eq!(rd.buffer(), b"bcdef");
        rd.consume(2);
        assert_eq!(rd.buffer(), b"def");
        rd.consume(3);
        assert_eq!(rd.buffer(), b"");
    }
}
