//! What an option of another tool is called here: the hint a usage error adds when the
//! argument clap did not know is one that iperf3 (or iperf2, netperf) users type by habit.

/// The hint for an argument wirebench does not know, when it is another tool's habit:
/// "iperf3's -u is `-t udp` here". `subcommand` is the command that refused it ("run",
/// "serve", or "" for wirebench itself), `arg` the argument as typed (`-u`, `--omit=2`).
pub fn hint(subcommand: &str, arg: &str) -> Option<&'static str> {
    let flag = arg.split_once('=').map_or(arg, |(f, _)| f);
    let top = subcommand.is_empty();
    Some(match flag {
        "-s" | "--server" if top => "iperf3's -s is `wirebench serve` here",
        "-c" | "--client" if top => {
            "iperf3's -c HOST is `wirebench run stream -c HOST` (or pingpong, rr, crr) here"
        }
        "-u" | "--udp" if subcommand == "serve" => {
            "a wirebench server carries every transport; the client picks one with `-t udp`"
        }
        "-u" | "--udp" => "iperf3's -u is `-t udp` here (-t names the transport)",
        "-p" | "--port" if subcommand == "run" => {
            "the port goes with the host here: `-c HOST:PORT` (the server's is `wirebench serve -p PORT`)"
        }
        "-O" | "--omit" => "iperf3's -O (omit the first seconds) is `--warmup DURATION` here",
        "-f" | "--format" => {
            "rates are always in Mbit/s here; --json, --csv or --json-stream for other tools"
        }
        "-l" | "--length" | "--len" => "iperf3's -l is `-s/--size` here (--write-size for a stream's writes)",
        "-t" | "--time" => "iperf3's -t (time) is `-d/--duration` here",
        "-k" | "--blockcount" => "iperf3's -k is `-n/--iterations` here",
        "-Z" => "iperf3's -Z is `--zerocopy` here",
        "-C" | "--congestion" | "--linux-congestion" => "iperf3's -C is `--cc` here",
        "-M" | "--set-mss" => "iperf3's -M is `--mss` here",
        "-N" | "--no-delay" => "iperf3's -N is `--nodelay` here",
        "--bitrate" | "--bandwidth" => "iperf3's -b/--bitrate is `-b/--rate` here",
        "--logfile" => "iperf3's --logfile is `--output FILE` here",
        "-4" | "-6" | "--version4" | "--version6" => {
            "the address family follows the address given to -c (an IPv6 address is written [::1]:PORT)"
        }
        "--get-server-output" => "the server's figures are always in the run's document here",
        "-D" | "--daemon" => "run `wirebench serve` under a service manager (systemd) instead of -D",
        _ => return None,
    })
}

/// iperf3's -n (bytes) is wirebench's --bytes; wirebench's -n counts iterations, so a value
/// with a size suffix given to -n is that habit.
pub fn iterations_hint(value: &str) -> Option<String> {
    let v = value.trim();
    let sized = v
        .chars()
        .last()
        .is_some_and(|c| matches!(c, 'k' | 'K' | 'm' | 'M' | 'g' | 'G' | 'b' | 'B'));
    (sized && crate::units::parse_bytes(v).is_ok())
        .then(|| format!("iperf3's -n (bytes) is `--bytes {v}` here; -n counts iterations"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_habits_get_their_names_here() {
        assert!(hint("run", "-u").unwrap().contains("-t udp"));
        assert!(hint("run", "--omit=2").unwrap().contains("--warmup"));
        assert!(hint("", "-s").unwrap().contains("wirebench serve"));
        assert!(hint("run", "-p").unwrap().contains("HOST:PORT"));
        // serve has its own -p; only a run's -p is a habit.
        assert_eq!(hint("serve", "-p"), None);
        assert!(hint("serve", "-u").unwrap().contains("every transport"));
        assert_eq!(hint("run", "-s"), None);
        assert_eq!(hint("run", "--no-such-thing"), None);
        assert!(iterations_hint("10M").unwrap().contains("--bytes 10M"));
        assert_eq!(iterations_hint("1000"), None);
    }
}
