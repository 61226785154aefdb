import CourierLog
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Identifies one message for its whole life. Its `description` is exactly the value sent in
/// the `Idempotency-Key` header, so a server can drop the duplicates that at-least-once
/// delivery produces.
public struct MessageID: Hashable, Sendable, Codable, CustomStringConvertible, Comparable {
    /// The UUID behind the id.
    public let uuid: UUID

    /// A new random (version 4) id, unless given a UUID.
    public init(_ uuid: UUID = MessageID.randomUUID()) { self.uuid = uuid }

    /// A version 4 UUID from the system's cryptographic generator, drawn from a pool refilled
    /// 4 KiB at a time: `UUID()` on Linux opens and reads /dev/urandom per call, a large share
    /// of `send` (<doc:MeasuredFigures>).
    @usableFromInline
    static func randomUUID() -> UUID {
        var bytes = randomPool.withLock { $0.take16() }
        withUnsafeMutableBytes(of: &bytes) { b in
            b[6] = (b[6] & 0x0F) | 0x40  // version 4
            b[8] = (b[8] & 0x3F) | 0x80  // RFC 4122 variant
        }
        return UUID(uuid: bytes)
    }

    /// Parses the `description` form (a UUID, any case).
    public init?(_ string: String) {
        guard let uuid = UUID(uuidString: string) else { return nil }
        self.uuid = uuid
    }

    /// Lower-case UUID, e.g. `7c0f3a52-5d7b-4a43-9d2e-2f1b3f5d9a10`. Written digit by digit:
    /// every attempt's `Idempotency-Key` is one, and `uuidString.lowercased()` formats with
    /// `snprintf` and then copies.
    public var description: String {
        withUnsafeBytes(of: uuid.uuid) { bytes in
            String(unsafeUninitializedCapacity: 36) { text in
                var n = 0
                for (i, byte) in bytes.enumerated() {
                    if i == 4 || i == 6 || i == 8 || i == 10 {
                        text[n] = UInt8(ascii: "-")
                        n += 1
                    }
                    text[n] = Self.hexDigit(byte >> 4)
                    text[n + 1] = Self.hexDigit(byte & 0x0F)
                    n += 2
                }
                return n
            }
        }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }

    /// The order of `description`s, compared byte by byte (lower-case hex in fixed places
    /// sorts as the bytes it spells), without making either string.
    public static func < (a: MessageID, b: MessageID) -> Bool {
        withUnsafeBytes(of: a.uuid.uuid) { x in withUnsafeBytes(of: b.uuid.uuid) { y in x.lexicographicallyPrecedes(y) }
        }
    }

    /// Decodes the id from its string form (the `Idempotency-Key`).
    public init(from decoder: any Decoder) throws {
        let string = try decoder.singleValueContainer().decode(String.self)
        guard let id = MessageID(string) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not a message id: \(string)"))
        }
        self = id
    }

    /// Encodes the id as its string form (the `Idempotency-Key`).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    /// The 16 raw bytes stored in the log.
    var bytes: [UInt8] { withUnsafeBytes(of: uuid.uuid) { Array($0) } }

    init?(bytes: ArraySlice<UInt8>) {
        guard bytes.count == 16 else { return nil }
        let b = Array(bytes)
        uuid = UUID(
            uuid: (b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
        )
    }
}

/// Random bytes from the system (one read of /dev/urandom per 4 KiB on Linux, arc4random on
/// Apple platforms), fetched in bulk: message ids and the default jitter source draw from it.
struct RandomPool {
    private var words = [UInt64](repeating: 0, count: 512)
    private var next = 512

    /// Eight random bytes (jitter's default source: no system call per draw).
    mutating func takeWord() -> UInt64 {
        if next == words.count {
            refill()
            next = 0
        }
        defer {
            // Used words are zeroed so a copy of the pool in memory cannot predict past draws.
            words[next] = 0
            next += 1
        }
        return words[next]
    }

    /// Sixteen random bytes (a message id), from two words.
    mutating func take16() -> uuid_t {
        let (high, low) = (takeWord(), takeWord())
        var result: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &result) { raw in
            raw.storeBytes(of: high, as: UInt64.self)
            raw.storeBytes(of: low, toByteOffset: 8, as: UInt64.self)
        }
        return result
    }
}

let randomPool = Locked(RandomPool())

/// Jitter's default source: a `SplitMix64` per thread, seeded once from `randomPool`. Runners on
/// several threads draw one value per outcome; the pool's lock, which `send` also takes for
/// every id, cost them as much as the draw. Jitter needs spread, not secrecy: ids keep the pool.
enum ThreadJitter {
    /// Each thread's generator, made on its first draw and freed with the thread.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let created = pthread_key_create(&key) { state in
            #if canImport(Darwin)
            state.assumingMemoryBound(to: SplitMix64.self).deallocate()
            #else
            state?.assumingMemoryBound(to: SplitMix64.self).deallocate()
            #endif
        }
        precondition(created == 0, "pthread_key_create failed")
        return key
    }()

    static func next() -> UInt64 {
        if let state = pthread_getspecific(key) { return state.assumingMemoryBound(to: SplitMix64.self).pointee.next() }
        let state = UnsafeMutablePointer<SplitMix64>.allocate(capacity: 1)
        state.initialize(to: SplitMix64(seed: randomPool.withLock { $0.takeWord() }))
        pthread_setspecific(key, state)
        return state.pointee.next()
    }
}

#if os(Linux)
/// Opened once, kept for the life of the process.
private let urandom: Int32 = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
#endif

extension RandomPool {
    /// One system call for the whole pool where the platform has one.
    private mutating func refill() {
        #if canImport(Darwin)
        words.withUnsafeMutableBytes { arc4random_buf($0.baseAddress, $0.count) }
        #elseif os(Linux)
        // One read of the kernel's generator per pool (getrandom(2) is not exported to Swift;
        // SystemRandomNumberGenerator makes one call per 8 bytes).
        let filled = words.withUnsafeMutableBytes { raw -> Bool in
            guard urandom >= 0 else { return false }
            var done = 0
            // /dev/urandom fills small reads whole; a few turns at most even if interrupted.
            for _ in 0..<16 where done < raw.count {
                let n = read(urandom, raw.baseAddress! + done, raw.count - done)
                if n > 0 { done += n }
            }
            return done == raw.count
        }
        if !filled {
            var generator = SystemRandomNumberGenerator()
            for i in words.indices { words[i] = generator.next() }
        }
        #else
        var generator = SystemRandomNumberGenerator()
        for i in words.indices { words[i] = generator.next() }
        #endif
    }
}
