// PointerOrigins: raw ranges a plugin passes back resolve to the allocation or IPC mapping they
// came from.
#include "common/plugin/pointer_origins.h"

#include "gtest/gtest.h"

namespace dmalab {
namespace {

TEST(PointerOriginsTest, ARangeInsideAnAllocationGetsItsId) {
  PointerOrigins o;
  o.Handed(MemRef{1, 0x1000, 0x100, 7});
  const MemRef r = o.Resolve(MemRef{1, 0x1010, 8, 0});
  EXPECT_EQ(r.alloc_id, 7u);
  EXPECT_EQ(r.via_mapping, 0u);
  // Another rank's bytes at the same address, or a range reaching past the end: unresolved.
  EXPECT_EQ(o.Resolve(MemRef{0, 0x1010, 8, 0}).alloc_id, 0u);
  EXPECT_EQ(o.Resolve(MemRef{1, 0x10f8, 16, 0}).alloc_id, 0u);
}

TEST(PointerOriginsTest, ARangeInsideAnIpcMappingGetsTheMappingsNumber) {
  PointerOrigins o;
  // A mapping has no allocation id of the opener's (the memory is the peer's); its number says
  // which mapping it is.
  o.Handed(MemRef{2, 0x7000, 0x60, 0, 4});
  const MemRef r = o.Resolve(MemRef{2, 0x7008, 8, 0});
  EXPECT_EQ(r.alloc_id, 0u);
  EXPECT_EQ(r.via_mapping, 4u);
  EXPECT_EQ(r.addr, 0x7008u);
  EXPECT_EQ(r.bytes, 8u);
}

TEST(PointerOriginsTest, ANewerOriginReplacesTheBytesItCoversOnly) {
  PointerOrigins o;
  o.Handed(MemRef{0, 0x1000, 0x300, 1});
  o.Handed(MemRef{0, 0x1100, 0x100, 0, 9});  // a mapping later placed over the middle
  EXPECT_EQ(o.Resolve(MemRef{0, 0x1000, 8, 0}).alloc_id, 1u);
  EXPECT_EQ(o.Resolve(MemRef{0, 0x1100, 8, 0}).via_mapping, 9u);
  EXPECT_EQ(o.Resolve(MemRef{0, 0x1100, 8, 0}).alloc_id, 0u);
  EXPECT_EQ(o.Resolve(MemRef{0, 0x1200, 8, 0}).alloc_id, 1u);
  EXPECT_EQ(o.size(), 3u);
}

TEST(PointerOriginsTest, ARangeThatNamesItsOriginIsKeptAsItIs) {
  PointerOrigins o;
  o.Handed(MemRef{0, 0x1000, 0x100, 1});
  EXPECT_EQ(o.Resolve(MemRef{0, 0x1000, 8, 5}).alloc_id, 5u);
  EXPECT_EQ(o.Resolve(MemRef{0, 0x1000, 8, 0, 3}).via_mapping, 3u);
  EXPECT_EQ(o.Resolve(MemRef{0, 0x1000, 8, 0, 3}).alloc_id, 0u);
}

}  // namespace
}  // namespace dmalab
