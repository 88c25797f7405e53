//! Hostile clients for the soak and robustness tests: each does to a server what an
//! unfriendly peer could, and returns what it saw. All traffic stays on loopback.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

pub fn write_frame(c: &mut TcpStream, v: &Value) -> std::io::Result<()> {
    let body = serde_json::to_vec(v).unwrap();
    c.write_all(&(body.len() as u32).to_be_bytes())?;
    c.write_all(&body)
}

pub fn read_frame(c: &mut TcpStream) -> std::io::Result<Value> {
    let mut len = [0u8; 4];
    c.read_exact(&mut len)?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    c.read_exact(&mut body)?;
    serde_json::from_slice(&body).map_err(|e| std::io::Error::other(e.to_string()))
}

pub fn hello() -> Value {
    json!({"type": "hello", "magic": "wirebench",
           "protocol": wirebench::control::protocol::PROTOCOL_VERSION, "version": "hostile"})
}

/// The test spec of a one-stream test, as `wirebench run` sends it.
pub fn test_spec(pattern: &str, transport: &str, direction: &str) -> Value {
    json!({
        "pattern": pattern, "transport": transport, "streams": 1, "direction": direction,
        "spin": false, "server_cpus": [], "interval_ms": null, "burst": 1,
        "fast": {"zerocopy": false, "sendfile": false, "skip_rx_copy": false, "batch": 16,
                 "gso": false, "gro": false, "busy_poll_us": null, "rcvlowat": "auto"},
        "one_port": false
    })
}

pub fn point_spec(size: u64, duration_ms: u64) -> Value {
    json!({
        "request_size": size, "response_size": size, "read_size": 65536,
        "duration_ms": duration_ms, "bytes": null, "iterations": null, "warmup": 10,
        "pace": null,
        "server_socket": {"sndbuf": 0, "rcvbuf": 0, "nodelay": false, "cc": null, "mss": null},
        "buffers_fixed": false
    })
}

/// Opens a control connection and says hello; returns it with the server's welcome.
pub fn greet(addr: &str) -> std::io::Result<(TcpStream, Value)> {
    let mut c = TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(20)))?;
    write_frame(&mut c, &hello())?;
    let w = read_frame(&mut c)?;
    Ok((c, w))
}

/// Connects and says nothing until dropped.
pub fn silent(addr: &str) -> Option<TcpStream> {
    TcpStream::connect(addr).ok()
}

/// Dribbles a valid hello one byte every `gap`; returns how many bytes the server took before
/// it closed the connection (all of them means it waited for the whole hello).
pub fn slow_hello(addr: &str, gap: Duration, give_up: Duration) -> usize {
    let Ok(mut c) = TcpStream::connect(addr) else {
        return 0;
    };
    let body = serde_json::to_vec(&hello()).unwrap();
    let mut frame = (body.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    let start = Instant::now();
    for (i, b) in frame.iter().enumerate() {
        if c.write_all(&[*b]).is_err() || start.elapsed() > give_up {
            return i;
        }
        std::thread::sleep(gap);
    }
    frame.len()
}

/// Opens a reverse UDP stream and sends the data hello from `spoof_from` (another loopback
/// address) with the right cookie: what a client aiming the server at a victim would do.
/// Returns the bytes the victim's socket received within `watch`.
pub fn spoofed_udp_hello(addr: &str, spoof_from: &str, watch: Duration) -> usize {
    let Ok((mut c, _)) = greet(addr) else {
        return 0;
    };
    let open = json!({"type": "open", "spec": test_spec("stream", "udp", "reverse")});
    if write_frame(&mut c, &open).is_err() {
        return 0;
    }
    let Ok(opened) = read_frame(&mut c) else {
        return 0;
    };
    let (Some(port), Some(cookie)) = (
        opened["endpoint"]
            .as_str()
            .and_then(|p| p.parse::<u16>().ok()),
        opened["cookie"].as_str().map(str::to_owned),
    ) else {
        return 0;
    };
    let point = json!({"type": "point", "spec": point_spec(1400, 5000)});
    if write_frame(&mut c, &point).is_err() || read_frame(&mut c).is_err() {
        return 0;
    }
    let victim = UdpSocket::bind(format!("{spoof_from}:0")).expect("a second loopback address");
    let server: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let mut hello = b"WBH1".to_vec();
    hello.extend((0..16).map(|i| u8::from_str_radix(&cookie[2 * i..2 * i + 2], 16).unwrap()));
    hello.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    let _ = victim.send_to(&hello, server);
    let _ = write_frame(&mut c, &json!({"type": "connected"}));
    // The client leaves at once, as an attacker would.
    drop(c);
    victim
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let until = Instant::now() + watch;
    let mut got = 0;
    let mut buf = [0u8; 65_536];
    while Instant::now() < until {
        if let Ok(n) = victim.recv(&mut buf) {
            got += n;
        }
    }
    got
}
