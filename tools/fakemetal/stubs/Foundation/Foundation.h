// Foundation, as far as native/metal/device.mm uses it: hand-written from Apple's documentation (the
// signature each declaration copies is in its comment). Not Apple's header: a wrong stub is only found
// on a Mac (`npm run test:metal`). Self-contained on purpose: id, Class and SEL are built into clang's
// Objective-C mode, and clang does not search gcc's private objc/ headers.
#pragma once
#include <stddef.h>
#include <stdint.h>

// The SDK these stubs stand for, as <Availability.h> states it: __MAC_OS_X_VERSION_MAX_ALLOWED is the SDK's
// version (150000: the macOS 15 SDK). TESSERA_FAKE_SDK picks another (tools/fakemetal/check.mjs checks
// device.mm against 130000, 140000 and 150000); Metal.h declares only what that SDK declares.
#ifndef TESSERA_FAKE_SDK
#define TESSERA_FAKE_SDK 150000
#endif
#define __MAC_OS_X_VERSION_MAX_ALLOWED TESSERA_FAKE_SDK
#define __MAC_OS_X_VERSION_MIN_REQUIRED 130000

typedef bool BOOL;  // <objc/objc.h> on arm64 Apple platforms: typedef bool BOOL
#define YES true
#define NO false
#ifndef nil
#define nil nullptr
#endif
typedef long NSInteger;            // <objc/NSObjCRuntime.h> (LP64)
typedef unsigned long NSUInteger;  // <objc/NSObjCRuntime.h> (LP64)
#define NS_ASSUME_NONNULL_BEGIN _Pragma("clang assume_nonnull begin")
#define NS_ASSUME_NONNULL_END _Pragma("clang assume_nonnull end")
#define NS_ENUM(T, N) enum N : T N; enum N : T
#define NS_OPTIONS(T, N) enum N : T N; enum N : T
// Apple's API_AVAILABLE(macos(X)) and API_DEPRECATED(msg, macos(X, Y)), spelled out: on a Linux target clang
// ignores macOS availability, so these document rather than check (the Mac build checks them).
#define TESSERA_MACOS_AVAILABLE(v) __attribute__((availability(macos, introduced = v)))
#define TESSERA_MACOS_DEPRECATED(v0, v1, msg) __attribute__((availability(macos, introduced = v0, deprecated = v1, message = msg)))

NS_ASSUME_NONNULL_BEGIN
@class NSString;
// @protocol NSObject: - (instancetype)retain; - (oneway void)release; - (instancetype)autorelease;
// - (NSUInteger)retainCount; - (BOOL)isEqual:(id)object;
@protocol NSObject
- (instancetype)retain;
- (oneway void)release;
- (instancetype)autorelease;
- (NSUInteger)retainCount;
- (BOOL)isEqual:(nullable id)object;
@end
// @interface NSObject <NSObject>: + (instancetype)alloc; + (instancetype)new; - (instancetype)init; - (void)dealloc;
__attribute__((objc_root_class))
@interface NSObject <NSObject> {
  Class isa;
}
+ (instancetype)alloc;
+ (instancetype)new;
- (instancetype)init;
- (void)dealloc;
@end
// @interface NSString: + (nullable instancetype)stringWithUTF8String:(const char *)nullTerminatedCString;
// @property(nullable, readonly) const char *UTF8String;
@interface NSString : NSObject
+ (nullable instancetype)stringWithUTF8String:(const char*)nullTerminatedCString;
@property(nullable, readonly) const char* UTF8String;
@end
// @interface NSURL: + (NSURL *)fileURLWithPath:(NSString *)path;
@interface NSURL : NSObject
+ (NSURL*)fileURLWithPath:(NSString*)path;
@end
// @interface NSError: @property(readonly) NSInteger code; @property(readonly, copy) NSString *localizedDescription;
@interface NSError : NSObject
@property(readonly) NSInteger code;
@property(readonly, copy) NSString* localizedDescription;
@end
NS_ASSUME_NONNULL_END
