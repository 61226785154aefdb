@testable @_spi(CourierTesting) import CourierKit
import CZlib
import CourierTesting
import Foundation
import Testing

/// `DestinationOptions.gzip`: the body goes compressed with `Content-Encoding: gzip` to the
/// destinations that ask for it (when that makes it smaller), the same bytes on every attempt,
/// and to no other.
@Suite(.timeLimit(.minutes(1))) struct GzipTests {
    /// What a server reads back: the body inflated (zlib, gzip wrapper), or nil if it is not gzip.
    static func gunzip(_ data: Data) -> Data? {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return nil
        }
        defer { inflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: 1 << 20)
        let status = data.withUnsafeBytes { input in
            output.withUnsafeMutableBytes { out in
                stream.next_in = UnsafeMutablePointer(mutating: input.bindMemory(to: Bytef.self).baseAddress)
                stream.avail_in = uInt(input.count)
                stream.next_out = out.bindMemory(to: Bytef.self).baseAddress
                stream.avail_out = uInt(out.count)
                return inflate(&stream, Z_FINISH)
            }
        }
        return status == Z_STREAM_END ? Data(output.prefix(Int(stream.total_out))) : nil
    }

    @Test func aGzipDestinationGetsTheSameCompressedBytesOnEveryAttemptAndOthersAndTinyBodiesGoPlain() async throws {
        let temporary = TemporaryDirectory()
        let clock = ManualClock()
        let transport = ScriptedTransport { $0.attempt == 1 ? .response(status: 500) : .response(status: 200) }
        var configuration = testConfiguration(clock: clock, transport: transport)
        configuration.destinations["HTTPS://Example.com"] = DestinationOptions(gzip: true)  // port 443 implied
        let courier = try Courier(directory: temporary.url, configuration: configuration)
        let text = String(repeating: "hello, gzip ", count: 40)
        let zipped = try courier.send(["text": text], to: inbox)
        let plain = try courier.send(["text": text], to: URL(string: "https://other.example/inbox")!)
        let tiny = try courier.send(["n": 1], to: inbox)  // gzip would make it longer
        await courier.settle()  // both first attempts ran and failed
        await clock.advance(by: .seconds(1))
        try await courier.delivered(zipped)
        try await courier.delivered(plain)
        let attempts = transport.requests.filter { $0.messageID == zipped }
        #expect(attempts.count == 2 && attempts[0].body == attempts[1].body, "the same bytes on each attempt")
        #expect(attempts.allSatisfy { $0.headers["Content-Encoding"] == "gzip" })
        let body = try #require(attempts.first?.body)
        #expect(body.count < text.utf8.count / 4)
        #expect(Self.gunzip(body) == Data(#"{"text":"\#(text)"}"#.utf8))
        try await courier.delivered(tiny)
        let other = transport.requests.filter { $0.messageID == plain || $0.messageID == tiny }
        #expect(other.allSatisfy { $0.headers["Content-Encoding"] == nil && Self.gunzip($0.body) == nil })
        await courier.close()
    }

    @Test(arguments: ["https://example.com/inbox", "example.com", "ftp://example.com", "https://example.com?q=1"])
    func aDestinationsKeyMustBeAnOrigin(key: String) {
        var configuration = Courier.Configuration()
        configuration.destinations[key] = DestinationOptions(gzip: true)
        #expect(configuration.problems.contains { $0.contains("destinations key") }, "\(key)")
    }

    @Test func anOriginWithOrWithoutItsDefaultPortIsOneDestination() {
        var configuration = Courier.Configuration()
        configuration.destinations["http://127.0.0.1:8080"] = DestinationOptions(gzip: true)
        configuration.destinations["https://api.example.com"] = DestinationOptions(gzip: true)
        #expect(configuration.problems.isEmpty)
        #expect(configuration.options(for: "http://127.0.0.1:8080/messages")?.gzip == true)
        #expect(configuration.options(for: "https://API.example.com:443/v1/x")?.gzip == true)
        #expect(configuration.options(for: "http://127.0.0.1:8081/messages") == nil)
    }
}
