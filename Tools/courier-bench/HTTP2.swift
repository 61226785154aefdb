#if canImport(AsyncHTTPClient) && canImport(NIOSSL) && canImport(NIOHTTP2)
import AsyncHTTPClient
import CourierKit
import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL

// `courier-bench --h2` (issue 24): does the Linux transport multiplex over HTTP/2 when a server
// offers it? A loopback server speaking TLS with ALPN "h2" answers 200 to every stream and
// counts connections and streams; Courier sends through AsyncHTTPClient with default settings
// (it trusts the server's throwaway certificate, made with the openssl command line).

/// Connections and streams the server saw.
final class HTTP2Counts: @unchecked Sendable {
    private let lock = NSLock()
    private var connections = 0, streams = 0
    func connection() { lock.withLock { connections += 1 } }
    func stream() { lock.withLock { streams += 1 } }
    var snapshot: (connections: Int, streams: Int) { lock.withLock { (connections, streams) } }
}

/// Answers 200 with an empty body at the end of each request.
final class HTTP2Responder: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart
    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .end = unwrapInboundIn(data) else { return }
        var headers = HTTPHeaders()
        headers.add(name: "content-length", value: "0")
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: .http2, status: .ok, headers: headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}

func http2Benchmark(root: URL, count: Int) async throws {
    say("-- HTTP/2: \(count) messages over TLS with ALPN h2, default settings, loopback (issue 24)")
    let key = root.appendingPathComponent("key.pem").path, cert = root.appendingPathComponent("cert.pem").path
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    let openssl = Process()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    openssl.arguments = [
        "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
        "-addext", "subjectAltName=IP:127.0.0.1"
    ]
    openssl.standardError = FileHandle.nullDevice
    try openssl.run()
    openssl.waitUntilExit()
    var tls = TLSConfiguration.makeServerConfiguration(
        certificateChain: try NIOSSLCertificate.fromPEMFile(cert).map { .certificate($0) },
        privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
    tls.applicationProtocols = ["h2"]
    let context = try NIOSSLContext(configuration: tls)
    let counts = HTTP2Counts()
    let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .childChannelInitializer { channel in
            counts.connection()
            return channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
            }.flatMap {
                channel.configureHTTP2Pipeline(mode: .server) { stream in
                    counts.stream()
                    return stream.eventLoop.makeCompletedFuture {
                        try stream.pipeline.syncOperations.addHandlers([
                            HTTP2FramePayloadToHTTP1ServerCodec(),
                            HTTP2Responder()
                        ])
                    }
                }.map { _ in }
            }
        }
        .bind(host: "127.0.0.1", port: 0).get()
    let port = server.localAddress!.port!

    var clientTLS = TLSConfiguration.makeClientConfiguration()
    clientTLS.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(cert))
    var clientConfiguration = HTTPClient.Configuration(tlsConfiguration: clientTLS)
    clientConfiguration.redirectConfiguration = .disallow
    let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
    var configuration = Courier.Configuration()
    configuration.allowsPurgeableDirectory = true  // a scratch directory, in tmp
    configuration.transport = AsyncHTTPClientTransport(client: client)
    let courier = try Courier(directory: root.appendingPathComponent("log"), configuration: configuration)
    let url = URL(string: "https://127.0.0.1:\(port)/inbox")!
    let start = ContinuousClock.now
    for i in 0..<count { try courier.send(["n": i, "text": "hello"], to: url) }
    // Polls every 50 ms, at most 60 s.
    while courier.pendingCount > 0 && start.duration(to: .now) < .seconds(60) {
        try await Task.sleep(for: .milliseconds(50))
    }
    let elapsed = seconds(start.duration(to: .now))
    let delivered = count - courier.pendingCount
    await courier.close()
    try await client.shutdown()
    try await server.close()
    let seen = counts.snapshot
    line(
        "\(count) messages over h2",
        String(
            format: "%.1f s | %d delivered | %d connection(s) | %d streams",
            elapsed, delivered, seen.connections, seen.streams))
}
#endif
