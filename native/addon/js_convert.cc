#include "addon/js_convert.h"

#include <cmath>

namespace tessera::addon {
namespace {

[[noreturn]] void bad(const std::string& what) { fail(Code::InvalidArgument, "tower spec: " + what); }

Napi::Value field(const Napi::Object& o, const char* key, const std::string& where) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) bad(where + "." + key + " is missing");
  return v;
}

std::string str(const Napi::Object& o, const char* key, const std::string& where) {
  Napi::Value v = field(o, key, where);
  if (!v.IsString()) bad(where + "." + key + " must be a string");
  return v.As<Napi::String>().Utf8Value();
}

double number(Napi::Value v, const std::string& where) {
  if (!v.IsNumber()) bad(where + " must be a number");
  return v.As<Napi::Number>().DoubleValue();
}

uint64_t u64(const Napi::Object& o, const char* key, const std::string& where) {
  double d = number(field(o, key, where), where + "." + key);
  if (!(d >= 0 && d <= 9007199254740991.0) || std::floor(d) != d) bad(where + "." + key + " must be a safe integer");
  return uint64_t(d);
}

Napi::Array array(const Napi::Object& o, const char* key, const std::string& where) {
  Napi::Value v = field(o, key, where);
  if (!v.IsArray()) bad(where + "." + key + " must be an array");
  return v.As<Napi::Array>();
}

}  // namespace

TowerSpec spec_from_js(const Napi::Object& obj) {
  TowerSpec spec;
  spec.family = str(obj, "family", "spec");
  Napi::Value dims = field(obj, "dims", "spec");
  if (!dims.IsObject()) bad("spec.dims must be an object");
  Napi::Object d = dims.As<Napi::Object>();
  Napi::Array keys = d.GetPropertyNames();
  for (uint32_t i = 0; i < keys.Length(); ++i) {
    std::string k = keys.Get(i).As<Napi::String>().Utf8Value();
    spec.dims[k] = number(d.Get(k), "spec.dims." + k);
  }
  Napi::Value lists = obj.Get("lists");
  if (lists.IsObject()) {
    Napi::Object l = lists.As<Napi::Object>();
    Napi::Array lk = l.GetPropertyNames();
    for (uint32_t i = 0; i < lk.Length(); ++i) {
      std::string k = lk.Get(i).As<Napi::String>().Utf8Value();
      Napi::Value v = l.Get(k);
      if (!v.IsArray()) bad("spec.lists." + k + " must be an array");
      Napi::Array a = v.As<Napi::Array>();
      for (uint32_t j = 0; j < a.Length(); ++j) spec.lists[k].push_back(number(a.Get(j), "spec.lists." + k));
    }
  }
  Napi::Array files = array(obj, "files", "spec");
  for (uint32_t i = 0; i < files.Length(); ++i) {
    if (!files.Get(i).IsString()) bad("spec.files entries must be strings");
    spec.files.push_back(files.Get(i).As<Napi::String>().Utf8Value());
  }
  Napi::Array stages = array(obj, "stages", "spec");
  for (uint32_t i = 0; i < stages.Length(); ++i) {
    std::string where = "spec.stages[" + std::to_string(i) + "]";
    if (!stages.Get(i).IsObject()) bad(where + " must be an object");
    Napi::Object so = stages.Get(i).As<Napi::Object>();
    StageSpec st;
    st.name = str(so, "name", where);
    st.kind = str(so, "kind", where);
    st.index = int(u64(so, "index", where));
    Napi::Array tensors = array(so, "tensors", where);
    for (uint32_t j = 0; j < tensors.Length(); ++j) {
      std::string tw = where + ".tensors[" + std::to_string(j) + "]";
      if (!tensors.Get(j).IsObject()) bad(tw + " must be an object");
      Napi::Object to = tensors.Get(j).As<Napi::Object>();
      TensorSpec t;
      t.role = str(to, "role", tw);
      t.name = str(to, "name", tw);
      if (!parse_dtype(str(to, "dtype", tw), &t.dtype)) bad(tw + ".dtype must be f32, f16, bf16 or q8_0");
      Napi::Array shape = array(to, "shape", tw);
      for (uint32_t k = 0; k < shape.Length(); ++k) {
        double s = number(shape.Get(k), tw + ".shape");
        if (!(s >= 0 && s < 4.0e12) || std::floor(s) != s) bad(tw + ".shape must hold non-negative integers");
        t.shape.push_back(int64_t(s));
      }
      t.file = int(u64(to, "file", tw));
      if (size_t(t.file) >= spec.files.size()) bad(tw + ".file is not an index into spec.files");
      t.offset = u64(to, "offset", tw);
      t.length = u64(to, "length", tw);
      Napi::Value pieces = to.Get("pieces");
      if (!pieces.IsUndefined()) {
        if (!pieces.IsArray()) bad(tw + ".pieces must be an array");
        Napi::Array pa = pieces.As<Napi::Array>();
        uint64_t total = 0;
        for (uint32_t k = 0; k < pa.Length(); ++k) {
          std::string pw = tw + ".pieces[" + std::to_string(k) + "]";
          if (!pa.Get(k).IsObject()) bad(pw + " must be an object");
          Napi::Object po = pa.Get(k).As<Napi::Object>();
          ByteRange r{u64(po, "offset", pw), u64(po, "length", pw)};
          if (r.offset + r.length < r.offset) bad(pw + " runs past 2^64");
          total += r.length;
          t.pieces.push_back(r);
        }
        if (t.pieces.empty() || t.pieces.front().offset != t.offset || total != t.length)
          bad(tw + ".pieces must be non-empty, start at its offset and add up to its length");
      }
      st.tensors.push_back(std::move(t));
    }
    spec.stages.push_back(std::move(st));
  }
  return spec;
}

Napi::Error coded_error(Napi::Env env, Code code, const std::string& message) {
  Napi::Error err = Napi::Error::New(env, message);
  err.Set("code", Napi::String::New(env, code_name(code)));
  return err;
}

}  // namespace tessera::addon
