// `dmalab calibrate`: runs MeasureCalibration (measure/calibrate.h) on the hardware backend and
// writes the fitted topology YAML.
#ifndef DMALAB_TOOLS_CALIBRATE_COMMAND_H_
#define DMALAB_TOOLS_CALIBRATE_COMMAND_H_

#include <string>

namespace dmalab {

struct CalibrateCommand {
  int gpus = 1;
  int ranks = 4;
  std::string out;           // the YAML path
  std::string command_line;  // recorded in the file's header
};

// `dmalab calibrate` on the hardware backend; writes `out`, re-reads it with the topology
// loader and prints the fitted rates. Exit status 0, or 2 on bad input or an error.
int RunCalibrateCommand(const CalibrateCommand& command);

}  // namespace dmalab

#endif  // DMALAB_TOOLS_CALIBRATE_COMMAND_H_
