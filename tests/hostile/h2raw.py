"""h2raw.py — a gRPC client at the HTTP/2 frame level (Debian's python3-h2), for what grpcio
will not send: upper-case header names, a compressed-flag message without grpc-encoding, a
receive window of zero (a client that never reads its replies)."""

import socket
import struct
import time

import h2.config
import h2.connection
import h2.events
import h2.settings


def grpc_frame(body, compressed=False):
    """One length-prefixed gRPC message."""
    return bytes([1 if compressed else 0]) + struct.pack(">I", len(body)) + body


class RawH2:
    """One HTTP/2 connection. window=0: the client never opens its receive window, so the
    server can send headers and trailers but no DATA."""

    def __init__(self, port, window=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        cfg = h2.config.H2Configuration(client_side=True, validate_outbound_headers=False,
                                        normalize_outbound_headers=False,
                                        validate_inbound_headers=False)
        self.conn = h2.connection.H2Connection(config=cfg)
        self.conn.initiate_connection()
        self.reads = window != 0
        if window is not None:
            self.conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: window})
        self.sock.sendall(self.conn.data_to_send())
        self.status = {}    # stream id -> grpc-status (int)
        self.message = {}   # stream id -> grpc-message
        self.data = {}      # stream id -> bytes of DATA received
        self.ended = set()  # streams the server ended (or reset)

    def call(self, path, body, headers=(), compressed=False):
        """Starts a unary call; returns its stream id."""
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", "POST"), (":scheme", "http"), (":path", path),
                (":authority", "127.0.0.1"), ("content-type", "application/grpc"),
                ("te", "trailers")] + list(headers)
        self.conn.send_headers(sid, hdrs)
        self.conn.send_data(sid, grpc_frame(body, compressed), end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        return sid

    def pump(self, timeout):
        """Reads what arrives within timeout seconds and records it."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except (socket.timeout, BlockingIOError):
            return
        if not data:
            raise EOFError("the server closed the connection")
        for ev in self.conn.receive_data(data):
            if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                for k, v in ev.headers:
                    k = k.decode() if isinstance(k, bytes) else k
                    v = v.decode() if isinstance(v, bytes) else v
                    if k == "grpc-status":
                        self.status[ev.stream_id] = int(v)
                    elif k == "grpc-message":
                        self.message[ev.stream_id] = v
            elif isinstance(ev, h2.events.DataReceived):
                self.data[ev.stream_id] = self.data.get(ev.stream_id, b"") + ev.data
                if self.reads:
                    self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                self.ended.add(ev.stream_id)
        out = self.conn.data_to_send()
        if out:
            self.sock.sendall(out)

    def wait(self, sid, seconds=10):
        """(grpc-status, grpc-message) of stream sid, waiting up to seconds for its end."""
        deadline = time.monotonic() + seconds
        while sid not in self.ended and time.monotonic() < deadline:
            self.pump(0.2)
        if sid not in self.ended:
            raise TimeoutError(f"stream {sid}: no answer within {seconds}s")
        return self.status.get(sid), self.message.get(sid, "")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass
