import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on 127.0.0.1 in front of a test server's Unix socket, run by `python3`: it forwards each direction of
/// every connection after a delay (a network with latency), or, once held, forwards nothing more while it keeps every
/// socket open (a server, or a middlebox, that stopped answering).
///
/// Driven through its standard input: `delay MS` sets the delay of each direction, `hold` stops forwarding, `freeze`
/// stops forwarding on the connections open now only, `cut` resets them; each answers `ok`. It ends when its standard input closes, so it never outlives the tests.
final class LatencyProxy: Sendable {
    private let process: Process
    private let input: FileHandle
    private let output: Int32
    /// The TCP port it listens on, on 127.0.0.1.
    let port: Int

    /// Whether `python3` can be found: the tests that need the proxy run only then.
    static let isAvailable = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")

    /// Starts a proxy to the Unix socket at `target`.
    init(to target: String) throws {
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("wlspg-proxy-\(UUID()).py")
        try Data(Self.script.utf8).write(to: script)
        defer { try? FileManager.default.removeItem(at: script) }
        var template = Array("/tmp/wlspg-proxy-XXXXXX".utf8CString)
        output = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard output >= 0 else { throw POSIXError(.EIO) }
        _ = fcntl(output, F_SETFD, FD_CLOEXEC)
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script.path, target]
        let pipe = Pipe()
        process.standardInput = pipe
        process.standardOutput = FileHandle(fileDescriptor: output, closeOnDealloc: false)
        try process.run()
        self.process = process
        self.input = pipe.fileHandleForWriting
        let output = self.output
        var port: Int?
        _ = eventually(timeout: 30) {
            port = Self.lines(output).first { $0.hasPrefix("port ") }.flatMap { Int($0.dropFirst(5)) }
            return port != nil || process.end != nil
        }
        guard let port else {
            kill(process.processIdentifier, SIGKILL)
            close(output)
            throw PostgresCluster.Failure(description: "the proxy did not start: \(Self.lines(output))")
        }
        self.port = port
        // The script is read by now: Python reads a script whole before it runs it.
    }

    deinit {
        try? input.close()
        if process.end == nil, process.waitForEnd(timeout: 10) == nil { kill(process.processIdentifier, SIGKILL) }
        close(output)
    }

    /// Delays every byte by `milliseconds` in each direction from now on.
    func delay(milliseconds: Int) throws {
        try command("delay \(milliseconds)")
    }

    /// Stops forwarding anything, on every connection, old and new; their sockets stay open.
    func hold() throws {
        try command("hold")
    }

    /// Stops forwarding anything on the connections open now, and keeps their sockets open, as a middlebox that drops
    /// a flow without a word; new connections are forwarded.
    func freeze() throws {
        try command("freeze")
    }

    /// Resets every connection open now, both sides, as a middlebox that drops its flows with a reset; new connections
    /// are forwarded.
    func cut() throws {
        try command("cut")
    }

    private func command(_ line: String) throws {
        let answered = Self.lines(output).count
        try input.write(contentsOf: Data((line + "\n").utf8))
        try #require(eventually(timeout: 30) { Self.lines(output).count > answered }, "the proxy did not answer")
    }

    private static func lines(_ descriptor: Int32) -> [String] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(bytes.count)) }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    private static let script = """
        import asyncio, os, sys

        target = sys.argv[1]
        delay = 0.0
        held = asyncio.Event()

        flows = []
        transports = []

        async def forward(reader, writer, frozen):
            loop = asyncio.get_running_loop()
            queue = asyncio.Queue()

            async def send():
                while True:
                    due, data = await queue.get()
                    wait = due - loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    if held.is_set() or frozen.is_set():
                        await asyncio.Event().wait()
                    if data is None:
                        writer.close()
                        return
                    writer.write(data)
                    await writer.drain()

            sender = asyncio.ensure_future(send())
            try:
                while True:
                    data = await reader.read(65536)
                    if not data:
                        break
                    queue.put_nowait((loop.time() + delay, data))
            except ConnectionError:
                pass
            queue.put_nowait((loop.time() + delay, None))
            try:
                await sender
            except ConnectionError:
                pass

        async def connection(client_reader, client_writer):
            if held.is_set():
                await asyncio.Event().wait()
            try:
                server_reader, server_writer = await asyncio.open_unix_connection(target)
            except OSError:
                client_writer.close()
                return
            frozen = asyncio.Event()
            flows.append(frozen)
            transports.append((client_writer.transport, server_writer.transport))
            await asyncio.gather(
                forward(client_reader, server_writer, frozen), forward(server_reader, client_writer, frozen),
                return_exceptions=True)

        async def main():
            global delay
            loop = asyncio.get_running_loop()
            server = await asyncio.start_server(connection, "127.0.0.1", 0)
            print("port", server.sockets[0].getsockname()[1], flush=True)
            reader = asyncio.StreamReader()
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
            while True:
                line = await reader.readline()
                if not line:
                    # Ends at once: held connections would be cancelled one by one, each with a message.
                    os._exit(0)
                words = line.decode().split()
                if words[:1] == ["delay"]:
                    delay = int(words[1]) / 1000
                elif words[:1] == ["hold"]:
                    held.set()
                elif words[:1] == ["freeze"]:
                    for frozen in flows:
                        frozen.set()
                    flows.clear()
                elif words[:1] == ["cut"]:
                    for pair in transports:
                        for transport in pair:
                            transport.abort()
                    transports.clear()
                print("ok", flush=True)

        asyncio.run(main())
        """
}
