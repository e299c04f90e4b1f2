if obj.spec.runPolicy ~= nil and obj.spec.runPolicy.suspend then
  obj.spec.runPolicy.suspend = false
end
return obj
