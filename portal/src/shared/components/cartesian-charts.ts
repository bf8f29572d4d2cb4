// ECharts for time series and stacked bars (luminaire data): a module of its own, so the first
// page (the dashboard's figures and gauges) does not load the cartesian charts.
import { use } from 'echarts/core';
import { CanvasRenderer } from 'echarts/renderers';
import { BarChart, LineChart } from 'echarts/charts';
import { GridComponent, LegendComponent, TooltipComponent } from 'echarts/components';

use([CanvasRenderer, BarChart, LineChart, GridComponent, LegendComponent, TooltipComponent]);

export { default as VChart } from 'vue-echarts';
