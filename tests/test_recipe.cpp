// Recipes: glob semantics, --rule syntax, JSON recipes, validation against the
// format table, and the shipped recipes in recipes/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mixq/error.hpp"
#include "mixq/format.hpp"
#include "mixq/recipe.hpp"
#include "support/test_support.hpp"

namespace mixq {
namespace {

using nlohmann::json;

TEST(Glob, StarCrossesDots) {
  EXPECT_TRUE(glob_match("blocks.*.mlp.*", "blocks.12.mlp.fc1"));
  EXPECT_TRUE(glob_match("*.mlp.fc2", "token_refiner.blocks.0.mlp.fc2"));
  EXPECT_TRUE(glob_match("*", "anything.at.all"));
  EXPECT_FALSE(glob_match("blocks.*.mlp.*", "token_refiner.blocks.0.mlp.fc1"));  // anchored
  EXPECT_FALSE(glob_match("blocks.*.mlp", "blocks.1.mlp.fc1"));
}

TEST(Glob, QuestionMarkBracesAndLiterals) {
  EXPECT_TRUE(glob_match("blocks.?.attn.qkv_proj", "blocks.7.attn.qkv_proj"));
  EXPECT_FALSE(glob_match("blocks.?.attn.qkv_proj", "blocks.17.attn.qkv_proj"));
  EXPECT_TRUE(glob_match("*.{attn.qkv_proj,mlp.fc1}", "blocks.3.mlp.fc1"));
  EXPECT_TRUE(glob_match("*.{attn.qkv_proj,mlp.fc1}", "blocks.3.attn.qkv_proj"));
  EXPECT_FALSE(glob_match("*.{attn.qkv_proj,mlp.fc1}", "blocks.3.mlp.fc2"));
  EXPECT_TRUE(glob_match("a[1]", "a[1]"));  // brackets are literal
  EXPECT_FALSE(glob_match("a[1]", "a1"));
  EXPECT_TRUE(glob_match("x{", "x{"));  // unclosed brace is literal
}

TEST(Rule, ParsesFormatAndTypedParams) {
  RecipeRule rule = parse_rule("*.attn.*=int8_tensorwise:convrot=true,convrot_groupsize=64,fallback=keep");
  EXPECT_EQ(rule.match, "*.attn.*");
  ASSERT_NE(rule.format, nullptr);
  EXPECT_EQ(rule.format->name, "int8_tensorwise");
  EXPECT_EQ(rule.params["convrot"], json(true));
  EXPECT_EQ(rule.params["convrot_groupsize"], json(64));
  EXPECT_TRUE(rule.fallback_keep);
  EXPECT_FALSE(rule.params.contains("fallback"));

  RecipeRule keep = parse_rule("blocks.0.*=keep");
  EXPECT_TRUE(keep.keeps());
  RecipeRule fp8 = parse_rule("*.fc2=float8_e4m3fn:full_precision_matrix_mult=true");
  EXPECT_EQ(fp8.params["full_precision_matrix_mult"], json(true));
}

TEST(Rule, RejectsBadSyntaxUnknownFormatsAndParams) {
  auto message = [](const char* text) {
    try {
      parse_rule(text);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_NE(message("nvfp4").find("PATTERN=FORMAT"), std::string::npos);
  std::string unknown = message("*=nvfp5");
  EXPECT_NE(unknown.find("unknown format 'nvfp5'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("nvfp4"), std::string::npos) << unknown;  // lists valid ones
  EXPECT_NE(unknown.find("keep"), std::string::npos) << unknown;
  std::string param = message("*=int8_tensorwise:group=3");
  EXPECT_NE(param.find("no parameter 'group'"), std::string::npos) << param;
  EXPECT_NE(param.find("convrot_groupsize"), std::string::npos) << param;
  std::string type = message("*=int8_tensorwise:convrot=maybe");
  EXPECT_NE(type.find("must be a bool"), std::string::npos) << type;
  EXPECT_NE(message("*=int8_tensorwise:convrot_groupsize=1x").find("an integer"), std::string::npos);
  EXPECT_NE(message("*=nvfp4:fallback=skip").find("fallback must be"), std::string::npos);
  EXPECT_NE(message("*=keep:convrot=true").find("no parameters"), std::string::npos);
  EXPECT_NE(message("*=nvfp4:novalue").find("not key=value"), std::string::npos);
}

TEST(Recipe, FirstMatchWinsAndDefault) {
  Recipe recipe = parse_recipe(json::parse(R"({
      "rules": [
        {"match": "blocks.0.*", "format": "keep"},
        {"match": "*.mlp.*", "format": "nvfp4"},
        {"match": "*.attn.*", "format": "int8_tensorwise", "convrot": true}
      ],
      "default": {"format": "float8_e4m3fn"}})"),
                               "test.json");
  EXPECT_TRUE(recipe.decide("blocks.0.mlp.fc1").keeps());
  EXPECT_EQ(recipe.decide("blocks.1.mlp.fc1").format->name, "nvfp4");
  EXPECT_EQ(recipe.decide("blocks.1.attn.out_proj").format->name, "int8_tensorwise");
  EXPECT_EQ(recipe.decide("condition_proj").format->name, "float8_e4m3fn");
  EXPECT_EQ(recipe.decide("blocks.1.attn.out_proj").describe(), "int8_tensorwise{convrot=true}");

  Recipe plain = parse_recipe(json::parse(R"({"rules": []})"), "empty.json");
  EXPECT_TRUE(plain.decide("x").keeps());  // default default is keep
}

TEST(Recipe, JsonErrorsNameTheRule) {
  auto message = [](const std::string& text) {
    try {
      parse_recipe(json::parse(text), "r.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_NE(message(R"({"rule": []})").find("unknown key 'rule'"), std::string::npos);
  EXPECT_NE(message(R"({"default": "keep"})").find("array \"rules\""), std::string::npos);
  EXPECT_NE(message(R"({"rules": [{"format": "nvfp4"}]})").find("r.json rule 1"), std::string::npos);
  std::string bad = message(R"({"rules": [{"match": "*", "format": "nvfp4"}, {"match": "*", "format": "int9"}]})");
  EXPECT_NE(bad.find("rule 2"), std::string::npos) << bad;
  EXPECT_NE(bad.find("unknown format 'int9'"), std::string::npos) << bad;
  EXPECT_NE(message(R"({"rules": [{"match": "*", "format": "int8_tensorwise", "convrot": "yes"}]})")
                .find("must be a bool"),
            std::string::npos);
  EXPECT_NE(message(R"({"rules": [], "default": "nope"})").find("default"), std::string::npos);
}

TEST(Recipe, ValidFormatsAreTheQuantizableRecords) {
  auto names = quantizable_format_names();
  EXPECT_EQ(names.back(), "keep");
  for (const std::string& name : names) {
    if (name == "keep") continue;
    const FormatTraits* f = find_format(name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_NE(f->quantize, nullptr) << name;
  }
  // Formats that need calibration data are refused with a reason.
  for (const FormatTraits* f : all_formats()) {
    if (!f->from_marker || f->quantize != nullptr) continue;
    try {
      parse_rule("*=" + std::string(f->name));
      ADD_FAILURE() << f->name << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("calibration"), std::string::npos) << e.what();
    }
  }
}

TEST(Recipe, ShippedRecipesParse) {
  // CMake compiles with absolute source paths.
  std::filesystem::path dir = std::filesystem::path(MIXQ_SOURCE_DIR) / "recipes";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    SCOPED_TRACE(entry.path().string());
    Recipe recipe = load_recipe(entry.path().string());
    EXPECT_FALSE(recipe.rules.empty());
    ++count;
  }
  EXPECT_GE(count, 3);
  Recipe fp8 = load_recipe((dir / "fp8-scaled.json").string());
  const RecipeRule& fc2 = fp8.decide("blocks.4.mlp.fc2");
  EXPECT_EQ(fc2.params.value("full_precision_matrix_mult", false), true);
  EXPECT_FALSE(fp8.decide("blocks.4.mlp.fc1").params.contains("full_precision_matrix_mult"));
  EXPECT_TRUE(fp8.decide("blocks.4.adaln_proj.linear").keeps());
}

}  // namespace
}  // namespace mixq
